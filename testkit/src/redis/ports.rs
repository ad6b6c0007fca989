//! Free ports on 127.0.0.1, each handed out once per process.

use std::collections::HashSet;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Mutex, OnceLock};

/// The system Redis; never hand its port (or its cluster bus port) out.
const SYSTEM_PORTS: [u16; 2] = [6379, 16379];

/// Ports handed out in this process; never handed out twice, so two tests
/// running in parallel cannot race for the same port and a restarted node
/// cannot be mistaken for another test's server.
fn handed_out() -> &'static Mutex<HashSet<u16>> {
    static PORTS: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    PORTS.get_or_init(|| Mutex::new(HashSet::from(SYSTEM_PORTS)))
}

fn bindable(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// A free TCP port on 127.0.0.1 (bind port 0, read it, release it). There is
/// a small window in which something else may take it; the server starters
/// retry on a new port when that happens.
pub fn free_port() -> u16 {
    pick_port(false)
}

/// A free port for a cluster node: its cluster bus port (`port + 10000`)
/// must exist and be free too, and is reserved with it.
pub(super) fn free_cluster_port() -> u16 {
    pick_port(true)
}

fn pick_port(cluster: bool) -> u16 {
    for _ in 0..1000 {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("bind 127.0.0.1:0")
            .port();
        let bus = port.checked_add(10_000);
        let mut ports = handed_out().lock().unwrap();
        if ports.contains(&port) {
            continue;
        }
        if cluster {
            match bus {
                Some(bus) if !ports.contains(&bus) && bindable(bus) => {
                    ports.insert(bus);
                }
                _ => continue,
            }
        }
        ports.insert(port);
        return port;
    }
    panic!("could not find a free port on 127.0.0.1");
}
