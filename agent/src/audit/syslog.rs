//! Audit records as syslog messages (RFC 5424), for the shipper a site
//! already runs (rsyslog, syslog-ng, Vector, Fluent Bit): over UDP
//! (RFC 5426), TCP with octet counting (RFC 6587) or a local datagram
//! socket such as `/dev/log`. Facility `authpriv`; the message is the
//! record's JSON line exactly as chained (so a collected copy verifies
//! with `maid audit verify`), and the structured data element
//! `maid@32473` repeats what a receiver filters on: seq, minion, jid,
//! fun, user, decision. (32473 is the enterprise number RFC 5612 sets
//! aside for documentation: maid has none of its own.)

use std::fmt::Write as _;

use serde::Deserialize;
use tokio::io::AsyncWriteExt;

use super::sinks::Line;

/// `authpriv`: security and authorisation messages kept private.
const FACILITY: u8 = 10;
/// The SD-ID of the structured data element.
pub const SD_ID: &str = "maid@32473";
/// The largest datagram sent; a larger record goes as a stub naming its
/// `seq`, size and SHA-256 (use TCP for records this large).
const MAX_DATAGRAM: usize = 60_000;

/// Where messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Udp(String),
    Tcp(String),
    Unix(std::path::PathBuf),
}

/// A syslog destination and the HOSTNAME its messages carry.
#[derive(Debug, Clone)]
pub struct Syslog {
    address: Address,
    hostname: String,
}

/// An open socket to the destination.
pub(super) enum Socket {
    Udp(tokio::net::UdpSocket),
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixDatagram),
}

impl Syslog {
    /// `udp://HOST:PORT`, `tcp://HOST:PORT` or `unix:PATH`; messages name
    /// `hostname` (the maid's id).
    pub fn parse(spec: &str, hostname: &str) -> Result<Self, crate::config::ConfigError> {
        let address = if let Some(a) = spec.strip_prefix("udp://") {
            Address::Udp(a.to_string())
        } else if let Some(a) = spec.strip_prefix("tcp://") {
            Address::Tcp(a.to_string())
        } else if let Some(p) = spec.strip_prefix("unix:") {
            Address::Unix(p.trim_start_matches("//").into())
        } else {
            return Err(crate::config::ConfigError::Invalid(format!(
                "audit.syslog {spec:?}: expected udp://HOST:PORT, tcp://HOST:PORT or unix:PATH"
            )));
        };
        Ok(Syslog {
            address,
            hostname: header_field(hostname, 255),
        })
    }

    pub fn address(&self) -> String {
        match &self.address {
            Address::Udp(a) => format!("udp://{a}"),
            Address::Tcp(a) => format!("tcp://{a}"),
            Address::Unix(p) => format!("unix:{}", p.display()),
        }
    }

    pub(super) async fn connect(&self) -> std::io::Result<Socket> {
        Ok(match &self.address {
            Address::Udp(a) => {
                let target = tokio::net::lookup_host(a.as_str())
                    .await?
                    .next()
                    .ok_or_else(|| std::io::Error::other(format!("{a}: no address")))?;
                let local = if target.is_ipv4() {
                    "0.0.0.0:0"
                } else {
                    "[::]:0"
                };
                let sock = tokio::net::UdpSocket::bind(local).await?;
                sock.connect(target).await?;
                Socket::Udp(sock)
            }
            Address::Tcp(a) => Socket::Tcp(tokio::net::TcpStream::connect(a.as_str()).await?),
            Address::Unix(p) => {
                let sock = tokio::net::UnixDatagram::unbound()?;
                sock.connect(p)?;
                Socket::Unix(sock)
            }
        })
    }

    pub(super) async fn send(&self, sock: &mut Socket, line: &Line) -> std::io::Result<()> {
        let msg = self.format(line, chrono::Utc::now());
        match sock {
            Socket::Tcp(s) => {
                let mut framed = format!("{} ", msg.len()).into_bytes();
                framed.extend_from_slice(&msg);
                s.write_all(&framed).await
            }
            Socket::Udp(s) => s.send(&self.fit(line, msg)).await.map(drop),
            Socket::Unix(s) => s.send(&self.fit(line, msg)).await.map(drop),
        }
    }

    /// `msg`, or when it is too large for a datagram, a stub in its place.
    fn fit(&self, line: &Line, msg: Vec<u8>) -> Vec<u8> {
        if msg.len() <= MAX_DATAGRAM {
            return msg;
        }
        let stub = serde_json::json!({
            "seq": line.seq,
            "oversize": line.bytes.len(),
            "sha256": maid_protocol::auditchain::line_sha256(&line.bytes),
        });
        let stub = Line {
            seq: line.seq,
            keep: line.keep,
            gap: line.gap,
            bytes: serde_json::to_vec(&stub).expect("json").into(),
        };
        self.format(&stub, chrono::Utc::now())
    }

    /// The RFC 5424 message of `line`, sent at `now`.
    pub(super) fn format(&self, line: &Line, now: chrono::DateTime<chrono::Utc>) -> Vec<u8> {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Fields<'a> {
            #[serde(borrow)]
            minion: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow)]
            jid: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow)]
            fun: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow)]
            user: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow)]
            decision: Option<std::borrow::Cow<'a, str>>,
        }
        let f: Fields = serde_json::from_slice(&line.bytes).unwrap_or_default();
        let decision = f.decision.as_deref().unwrap_or("");
        let pri = FACILITY * 8 + severity(decision);
        let mut out = format!(
            "<{pri}>1 {} {} maid {} {} [{SD_ID} seq=\"{}\"",
            now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            self.hostname,
            std::process::id(),
            header_field(decision, 32),
            line.seq,
        );
        for (name, value) in [
            ("minion", &f.minion),
            ("jid", &f.jid),
            ("fun", &f.fun),
            ("user", &f.user),
            ("decision", &f.decision),
        ] {
            if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
                let _ = write!(out, " {name}=\"{}\"", param_value(v));
            }
        }
        out.push_str("] \u{feff}");
        let mut out = out.into_bytes();
        out.extend_from_slice(&line.bytes);
        out
    }
}

/// How urgent a record is: a gap is an error, a refusal a notice.
fn severity(decision: &str) -> u8 {
    match decision {
        "gap" => 3,
        "denied" | "rejected" | "plugin_refused" => 5,
        _ => 6,
    }
}

/// A header field: printable US-ASCII, at most `max` characters, `-`
/// when empty (RFC 5424 §6.2).
fn header_field(s: &str, max: usize) -> String {
    let v: String = s
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(max)
        .collect();
    if v.is_empty() { "-".into() } else { v }
}

/// A PARAM-VALUE: `"`, `\` and `]` escaped (RFC 5424 §6.3.3).
fn param_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        if matches!(c, '"' | '\\' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_an_rfc5424_message_with_its_fields_escaped() {
        let s = Syslog::parse("udp://127.0.0.1:514", "web 1").unwrap();
        let line = Line {
            seq: 7,
            keep: true,
            gap: false,
            bytes: br#"{"seq":7,"minion":"web-1","jid":"j1","fun":"cmd.run","user":"a\"l]i\\ce","decision":"ran"}"#
                .as_slice()
                .into(),
        };
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-29T08:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let msg = String::from_utf8(s.format(&line, now)).unwrap();
        let pid = std::process::id();
        assert_eq!(
            msg,
            format!(
                "<86>1 2026-11-29T08:00:00.000000Z web1 maid {pid} ran [maid@32473 seq=\"7\" \
                 minion=\"web-1\" jid=\"j1\" fun=\"cmd.run\" user=\"a\\\"l\\]i\\\\ce\" \
                 decision=\"ran\"] \u{feff}{}",
                std::str::from_utf8(&line.bytes).unwrap()
            )
        );
        assert!(Syslog::parse("http://x", "m").is_err());
        assert_eq!(
            Syslog::parse("unix:/dev/log", "m").unwrap().address,
            Address::Unix("/dev/log".into())
        );
    }
}
