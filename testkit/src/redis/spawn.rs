//! Spawning servers so that they die with the test process, and killing
//! and reaping them.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::thread;

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` so that the child gets SIGKILL when this test process dies.
///
/// Linux sends the parent-death signal when the *thread* that forked the
/// child exits, and test threads (or tokio's blocking threads) come and go;
/// so every server is forked from one thread that lives as long as the
/// process.
pub(super) fn spawn(mut cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    // SAFETY: the closure only makes the prctl(2) system call, which is
    // async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(io::Error::from)
        });
    }
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        thread::Builder::new()
            .name("redis-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("start the redis spawner thread");
        tx
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner
        .send((cmd, reply_tx))
        .expect("redis spawner thread is gone");
    reply_rx.recv().expect("redis spawner thread is gone")
}

pub(super) fn kill_child(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}
