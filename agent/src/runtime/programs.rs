//! Which programs a job may start without the `shell` grant: the one
//! classification of programs the exec rule (`Grants::check_program`)
//! reads.
//!
//! A deny-list of programs that run other programs always misses one
//! (`split --filter`, `setarch`, `ssh-agent`, `sqlite3 .shell`, `gcc
//! -wrapper`, `scp -S` all did). So the rule is an allow-list instead:
//! without `shell`, a program reached through an exec *glob* starts only
//! when it is in [`PLAIN`]; anything not classified needs `shell` (or the
//! grant naming its path exactly). Missing a program here can only refuse
//! too much, never allow too much.
//!
//! A plain program
//! * never starts another program (no hooks, filters, helpers, pagers,
//!   editors, wrappers), whatever its arguments or environment say;
//! * runs no code given in its arguments or in files they name;
//! * writes no file content where its arguments say. The rule goes by the
//!   program's file name, so a program that could copy `/bin/sh` over
//!   `/usr/bin/cat` (as `cp`, `tee`, `dd` or `uniq IN OUT` as root can)
//!   would make any program plain by name;
//! * sets no file mode a job picks (`chmod`, `mkdir -m`, `mknod`): the
//!   host refuses set-uid and world-writable modes without the
//!   `special_modes` grant, and a plain program must not bypass that.
//!
//! Both the name a program is asked by and its real file's name must be
//! plain, and the real file must be an ELF executable: a script is run by
//! its interpreter, and a file that is neither is handed to `/bin/sh` by
//! libc's `execvp`.
//!
//! [`RUNS_ITS_ARGUMENTS`] stays as the list of programs refused even when
//! a grant names them exactly, unless `shell`: an allow-list that names
//! one would let a job run anything.

use std::io::Read;
use std::path::Path;

use super::denied::Denied;

/// Programs that may start through an exec glob without `shell`: see the
/// module header for what qualifies. Matched on the exact file name (no
/// version suffix is taken off). Where a program could do more than its
/// name says, the comment says why it still qualifies.
pub const PLAIN: &[&str] = &[
    // Print something about the system or a user.
    "arch",
    "date", // `-s` sets the clock; `-f` reads a file: neither runs code.
    "cal",
    "hostid",
    "hostname", // Also sets the host name: no file, no program.
    "dnsdomainname",
    "domainname",
    "nisdomainname",
    "ypdomainname",
    "uname",
    "nproc",
    "uptime",
    "id",
    "groups",
    "whoami",
    "logname",
    "users",
    "who",
    "w",
    "last",
    "tty",
    "printenv",
    "locale",
    "free",
    "vmstat",
    "df",
    "du",
    "lscpu",
    "lsmem",
    "lsns",
    "lslocks",
    "lsipc",
    "lsblk",
    "findmnt",
    "mountpoint",
    "dmesg", // Pages only when its output is a terminal; exec's never is.
    "ps",
    "pgrep",
    "pidof",
    "killall5", // What `pidof` really is on Debian; signals, nothing else.
    "pstree",
    "pmap",
    "pwdx",
    "lsof",
    "ping",
    // Signal or re-prioritise processes: no file, no program.
    "kill",
    "pkill",
    "killall",
    "fuser",
    "renice",
    "logger", // `-f` logs a file's lines to syslog; it writes no file.
    "sleep",
    "sync",
    // Look at files and print what they hold.
    "ls",
    "dir",
    "vdir",
    "stat",
    "namei",
    "whereis",
    "lsattr",
    "readlink",
    "realpath",
    "basename",
    "dirname",
    "pwd",
    "cat",
    "tac",
    "head",
    "tail",
    "wc",
    "cut",
    "paste",
    "join",
    "comm",
    "tr",
    "fold",
    "fmt",
    "nl",
    "expand",
    "unexpand",
    "column",
    "rev",
    "tsort",
    "pr",
    "od",
    "hexdump",
    "strings",
    "base32",
    "base64",
    "basenc",
    "md5sum",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "sum",
    "cmp",
    "grep", // No option runs a program (unlike `rg --pre`).
    "jq",   // Its language reads JSON and prints; it cannot run or write.
    // Compute and print.
    "echo",
    "printf",
    "true",
    "false",
    "yes",
    "seq",
    "test",
    "[",
    "expr",
    "factor",
    "numfmt",
    // Change the tree without writing content a job picks: an empty file
    // (umask mode), a private temporary file, or an unlink.
    "touch",
    "mktemp",
    "rm",
    "rmdir",
    "unlink",
];

/// Programs that run code named by their arguments (or by files their
/// arguments name): shells, interpreters, and the tools that start another
/// program from their command line. An allow-list that names one would let
/// a job run anything, so they start only for plugins granted `shell`,
/// even when a grant names them exactly. Matched on the program's file
/// name, requested and resolved, with a version suffix taken off
/// (`python3.11` is `python`).
pub const RUNS_ITS_ARGUMENTS: &[&str] = &[
    // Shells.
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "ksh93",
    "mksh",
    "pdksh",
    "csh",
    "tcsh",
    "fish",
    "ash",
    "rbash",
    "yash",
    "elvish",
    "nu",
    "xonsh",
    "pwsh",
    "busybox",
    "toybox",
    // Interpreters.
    "python",
    "pypy",
    "perl",
    "ruby",
    "irb",
    "node",
    "nodejs",
    "deno",
    "bun",
    "php",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "expect",
    "R",
    "Rscript",
    "julia",
    "guile",
    "gawk",
    "awk",
    "mawk",
    "nawk",
    "sed",
    "jshell",
    "groovy",
    "scala",
    "ghci",
    "runghc",
    "ocaml",
    "erl",
    "escript",
    "bc",
    "dc",
    "m4",
    "gdb",
    "lldb",
    "vim",
    "vi",
    "nvim",
    "ex",
    "view",
    "emacs",
    "ed",
    "sqlite3", // `.shell` and `.system`.
    // Tools that start a program from their arguments.
    "env",
    "xargs",
    "find",
    "nohup",
    "timeout",
    "sudo",
    "su",
    "doas",
    "runuser",
    "setpriv",
    "setsid",
    "nice",
    "ionice",
    "chrt",
    "taskset",
    "stdbuf",
    "unshare",
    "nsenter",
    "chroot",
    "flock",
    "watch",
    "time",
    "script",
    "strace",
    "ltrace",
    "valgrind",
    "systemd-run",
    "start-stop-daemon",
    "parallel",
    "at",
    "batch",
    "ssh",
    "ssh-agent", // `ssh-agent COMMAND`.
    "scp",       // `-S PROGRAM`.
    "sftp",      // `-S PROGRAM`.
    "git",
    "tar",
    "cpio", // `--rsh-command`.
    "zip",
    "rsync",
    "make",
    "less",
    "more",
    "man",
    "capsh",
    "prlimit",
    "cgexec",
    "firejail",
    "bwrap",
    "sg",
    "newgrp",
    "pkexec",
    "dbus-launch",
    "dbus-run-session",
    "xdg-open",
    "run-parts",
    "install-info",
    "split",   // `--filter=COMMAND`.
    "sort",    // `--compress-program=PROGRAM`.
    "install", // `--strip-program=PROGRAM`.
    "setarch", // `setarch ARCH PROGRAM`, and its names below.
    "linux32",
    "linux64",
    "i386",
    "x86_64",
    "uname26",
    "gcc", // `-wrapper PROGRAM`, and `-B` picks the compiler's parts.
    "cc",
    "c++",
    "g++",
    "cpp",
    "clang",
    "clang++",
    "nc", // `-e`/`-c` in the traditional netcat.
    "netcat",
    "ncat",
    "socat",   // `EXEC:`.
    "wget",    // `--use-askpass=PROGRAM`.
    "crontab", // Installs commands that cron runs.
    "diff3",   // `--diff-program`.
    "sdiff",   // `--diff-program` and its editor.
    // The dynamic loader runs the program its argument names.
    "ld.so",
    "ld-linux.so",
    "ld-linux-x86-64.so",
    "ld-linux-aarch64.so",
    "ld-linux-armhf.so",
];

/// Programs that are *not* plain, with why: the examples the attacks and
/// reviews found. Not consulted by the rule (anything not in [`PLAIN`] is
/// refused through a glob already); the tests check that none of them is
/// in [`PLAIN`], so no one adds one back by mistake.
pub const NOT_PLAIN: &[(&str, &str)] = &[
    ("tar", "--to-command, -I, --checkpoint-action=exec"),
    ("sort", "--compress-program"),
    ("install", "--strip-program, and -m sets any mode"),
    ("split", "--filter"),
    ("find", "-exec"),
    ("xargs", "runs its arguments"),
    ("env", "runs its arguments"),
    ("timeout", "runs its arguments"),
    ("nice", "runs its arguments"),
    ("nohup", "runs its arguments"),
    ("stdbuf", "runs its arguments"),
    ("setarch", "runs its arguments"),
    ("linux64", "setarch"),
    ("linux32", "setarch"),
    ("flock", "runs its arguments"),
    ("watch", "runs its arguments through sh"),
    ("chroot", "runs its arguments"),
    ("sudo", "runs its arguments"),
    ("su", "-c"),
    ("runuser", "runs its arguments"),
    ("unshare", "runs its arguments"),
    ("nsenter", "runs its arguments"),
    ("ssh", "runs commands, ProxyCommand"),
    ("ssh-agent", "runs its arguments"),
    ("scp", "-S"),
    ("rsync", "-e, --rsync-path"),
    ("sqlite3", ".shell, .system"),
    ("gcc", "-wrapper"),
    ("cc", "-wrapper"),
    ("make", "runs its recipes"),
    ("git", "hooks, aliases, -c core.*"),
    ("vim", ":!"),
    ("less", "!"),
    ("more", "!"),
    ("man", "runs a pager and preprocessors"),
    ("awk", "system()"),
    ("sed", "the e command"),
    (
        "dpkg",
        "runs the maintainer scripts of the package it is given",
    ),
    ("apt", "hooks, and dpkg"),
    ("apt-get", "hooks, and dpkg"),
    (
        "systemctl",
        "edit runs an editor; link installs units that run",
    ),
    ("cp", "can copy /bin/sh over a plain program's name"),
    ("mv", "can move /bin/sh to a plain program's name"),
    ("ln", "a hard link gives /bin/sh a plain program's name"),
    ("tee", "writes what it is given where it is told"),
    ("dd", "writes what it is given where it is told"),
    ("uniq", "uniq IN OUT writes a file"),
    ("shuf", "-o writes a file"),
    ("csplit", "writes files named by its arguments"),
    ("xxd", "-r writes a file"),
    ("gzip", "writes files"),
    ("zstd", "-o writes a file"),
    ("curl", "-o writes a file; fetches from the network"),
    ("chmod", "sets set-uid and world-writable modes"),
    ("chown", "changes owners the host's file calls do not"),
    ("mkdir", "-m sets any mode"),
    ("mkfifo", "-m sets any mode"),
    ("mknod", "makes device nodes"),
    ("setcap", "gives a program capabilities"),
    ("sysctl", "kernel.core_pattern runs a program as root"),
    ("mount", "runs mount helpers; mounts over system files"),
    ("ip", "ip netns exec"),
    ("ss", "-D writes a file"),
    ("blkid", "-c writes a cache file"),
    ("dmidecode", "--dump-bin writes a file"),
    ("getconf", "-v runs a helper program"),
    ("iconv", "loads conversion modules by name"),
    ("useradd", "runs nscd and configured commands"),
    ("top", "its config can run commands"),
    ("diff", "-l runs pr"),
    ("getent", "-s names the NSS module it loads"),
    ("nc", "-e"),
    ("wget", "--use-askpass"),
];

/// Whether a program whose file name is `name` runs code from its
/// arguments ([`RUNS_ITS_ARGUMENTS`]).
pub fn runs_its_arguments(name: &str) -> bool {
    // `python3.11`, `perl5.36.0`, `lua5.4`: the name without its version.
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    let base = if base.is_empty() { name } else { base };
    [name, base].iter().any(|n| RUNS_ITS_ARGUMENTS.contains(n))
}

/// Whether a program whose file name is `name` is classified [`PLAIN`].
pub fn is_plain(name: &str) -> bool {
    PLAIN.contains(&name)
}

/// Whether the file at `path` is an ELF executable, which the kernel runs
/// itself: anything else is run by an interpreter its first line names or,
/// failing that, by `/bin/sh`.
pub fn is_elf(path: &Path) -> std::io::Result<bool> {
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path)?;
    match file.read_exact(&mut magic) {
        Ok(()) => Ok(&magic == b"\x7fELF"),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// Why a program reached through an exec glob may not start without
/// `shell`, if it may not: `resolved` is where it was found, `real` the
/// file that would run.
pub fn not_plain(resolved: &Path, real: &Path) -> Option<Denied> {
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    for path in [resolved, real] {
        let n = name(path).unwrap_or_default();
        if !is_plain(&n) {
            return Some(Denied::NotPlain {
                program: resolved.to_path_buf(),
                name: n,
            });
        }
    }
    match is_elf(real) {
        Ok(true) => None,
        Ok(false) => Some(Denied::NotElf {
            resolved: resolved.to_path_buf(),
            real: real.to_path_buf(),
        }),
        Err(e) => Some(Denied::UnknownKind {
            program: resolved.to_path_buf(),
            error: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_plain_program_is_a_runner_or_a_known_exception() {
        for name in PLAIN {
            assert!(!runs_its_arguments(name), "{name} runs its arguments");
            assert!(
                !NOT_PLAIN.iter().any(|(n, _)| n == name),
                "{name} is listed as not plain"
            );
        }
        let mut sorted = PLAIN.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), PLAIN.len(), "an entry is listed twice");
    }

    #[test]
    fn every_not_plain_example_is_refused_and_every_plain_one_admitted() {
        for (name, why) in NOT_PLAIN {
            assert!(!is_plain(name), "{name}: {why}");
            let p = Path::new("/usr/bin").join(name);
            assert!(not_plain(&p, &p).is_some(), "{name}");
        }
        for name in PLAIN {
            assert!(is_plain(name), "{name}");
        }
        for name in [
            "sh",
            "split",
            "setarch",
            "linux64",
            "ssh-agent",
            "sqlite3",
            "gcc",
            "scp",
        ] {
            assert!(runs_its_arguments(name), "{name}");
        }
        // A version suffix makes a different, unclassified name.
        assert!(!is_plain("cat2"));
        assert!(runs_its_arguments("python3.11"));
    }

    #[test]
    fn a_plain_name_must_be_an_elf_executable_under_both_names() {
        let dir = tempfile::tempdir().unwrap();
        let elf = dir.path().join("cat");
        std::fs::copy("/usr/bin/true", &elf).unwrap();
        assert_eq!(not_plain(&elf, &elf), None);
        // A script or a data file under a plain name.
        for (name, body) in [
            ("ls", "#!/bin/sh\ntouch x\n"),
            ("echo", "touch x\n"),
            ("id", ""),
        ] {
            let p = dir.path().join(name);
            std::fs::write(&p, body).unwrap();
            let why = not_plain(&p, &p).expect(name);
            assert!(matches!(why, Denied::NotElf { .. }), "{why}");
            assert!(why.to_string().contains("not an ELF"), "{why}");
        }
        // Asked for by a plain name, really something else, or the reverse.
        assert!(not_plain(Path::new("/usr/bin/cat"), Path::new("/usr/bin/dash")).is_some());
        assert!(not_plain(Path::new("/opt/tool"), &elf).is_some());
        // Unreadable or missing: refused.
        assert!(not_plain(&dir.path().join("cat"), &dir.path().join("nope/cat")).is_some());
    }
}
