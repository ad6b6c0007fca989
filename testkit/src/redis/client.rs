//! Small Redis helpers for the starters' own checks (blocking, with
//! timeouts).

use std::collections::HashMap;
use std::time::Duration;

/// Socket timeouts for the helpers' own connections, so a stuck server makes
/// a poll fail instead of hanging the test.
const IO_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) fn url_for(port: u16) -> String {
    format!("redis://127.0.0.1:{port}/")
}

/// A connection to 127.0.0.1:`port` whose reads and writes time out.
pub(super) fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(url_for(port))?;
    let con = client.get_connection_with_timeout(IO_TIMEOUT)?;
    con.set_read_timeout(Some(IO_TIMEOUT))?;
    con.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(con)
}

/// Runs one command on 127.0.0.1:`port` over a fresh connection.
pub(super) fn query<T: redis::FromRedisValue>(
    port: u16,
    cmd: &redis::Cmd,
) -> redis::RedisResult<T> {
    let mut con = connect(port)?;
    cmd.query(&mut con)
}

/// `INFO <section>` as key/value pairs.
pub(super) fn info(port: u16, section: &str) -> redis::RedisResult<HashMap<String, String>> {
    let text: String = query(port, redis::cmd("INFO").arg(section))?;
    Ok(parse_info(&text))
}

pub(super) fn parse_info(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

/// A flat `[k1, v1, k2, v2, ...]` reply (as SENTINEL returns) as a map.
pub(super) fn flat_map(entry: &[String]) -> HashMap<&str, &str> {
    entry
        .chunks(2)
        .filter(|kv| kv.len() == 2)
        .map(|kv| (kv[0].as_str(), kv[1].as_str()))
        .collect()
}
