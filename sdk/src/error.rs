//! The error a plugin function returns, and how it crosses into WIT.

use std::fmt;

use crate::bindings::maid::plugin::host::HostError;
use crate::bindings::maid::plugin::types;

/// Which Salt return a failed call becomes (PROTOCOL.md section 3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `Passed invalid arguments: ...`, retcode 1.
    BadArguments,
    /// `Denied: ...`, retcode 77.
    Denied,
    /// The function failed: the message is the return, with the error's
    /// retcode.
    Failed,
}

/// A failed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// Which Salt return this becomes.
    pub kind: ErrorKind,
    /// Shown to whoever ran the job.
    pub message: String,
    /// The job's retcode for [`ErrorKind::Failed`].
    pub retcode: i32,
}

impl Error {
    /// The arguments do not fit the function.
    pub fn bad_arguments(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::BadArguments,
            message: message.into(),
            retcode: 1,
        }
    }

    /// Something the call needs is not granted.
    pub fn denied(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Denied,
            message: message.into(),
            retcode: 77,
        }
    }

    /// The function failed; the job ends with `retcode` (use 1 when there
    /// is nothing more specific).
    pub fn failed(message: impl Into<String>, retcode: i32) -> Self {
        Self {
            kind: ErrorKind::Failed,
            message: message.into(),
            retcode,
        }
    }

    pub(crate) fn into_wit(self) -> types::Error {
        types::Error {
            kind: match self.kind {
                ErrorKind::BadArguments => types::ErrorKind::BadArguments,
                ErrorKind::Denied => types::ErrorKind::Denied,
                ErrorKind::Failed => types::ErrorKind::Failed,
            },
            message: self.message,
            retcode: self.retcode,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<HostError> for Error {
    fn from(err: HostError) -> Self {
        match err {
            HostError::Denied(message) => Error::denied(message),
            HostError::Failed(message) => Error::failed(message, 1),
        }
    }
}

impl From<std::io::Error> for Error {
    /// Filesystem errors: a path outside the preopened directories, or one
    /// they do not let this plugin write, is a denial; the rest are failures.
    fn from(err: std::io::Error) -> Self {
        // wasi-libc's ENOTCAPABLE: the path is outside every preopen.
        const ENOTCAPABLE: i32 = 76;
        let denied = err.kind() == std::io::ErrorKind::PermissionDenied
            || err.kind() == std::io::ErrorKind::ReadOnlyFilesystem
            || err.raw_os_error() == Some(ENOTCAPABLE);
        let text = match err.raw_os_error() {
            Some(code) if cfg!(target_os = "wasi") => linux_numbered(&err.to_string(), code),
            _ => err.to_string(),
        };
        if denied {
            Error::denied(text)
        } else {
            Error::failed(text, 1)
        }
    }
}

/// WASI's errno numbers (wasi-libc's, as `raw_os_error` gives them inside
/// the sandbox), each with the number Linux gives the same error: a
/// plugin's `No such file or directory (os error 44)` says `os error 2`,
/// as the host's own programs and Salt do.
const WASI_TO_LINUX: [(i32, i32); 75] = [
    (1, 7),    // E2BIG
    (2, 13),   // EACCES
    (3, 98),   // EADDRINUSE
    (4, 99),   // EADDRNOTAVAIL
    (5, 97),   // EAFNOSUPPORT
    (6, 11),   // EAGAIN
    (7, 114),  // EALREADY
    (8, 9),    // EBADF
    (9, 74),   // EBADMSG
    (10, 16),  // EBUSY
    (11, 125), // ECANCELED
    (12, 10),  // ECHILD
    (13, 103), // ECONNABORTED
    (14, 111), // ECONNREFUSED
    (15, 104), // ECONNRESET
    (16, 35),  // EDEADLK
    (17, 89),  // EDESTADDRREQ
    (18, 33),  // EDOM
    (19, 122), // EDQUOT
    (20, 17),  // EEXIST
    (21, 14),  // EFAULT
    (22, 27),  // EFBIG
    (23, 113), // EHOSTUNREACH
    (24, 43),  // EIDRM
    (25, 84),  // EILSEQ
    (26, 115), // EINPROGRESS
    (27, 4),   // EINTR
    (28, 22),  // EINVAL
    (29, 5),   // EIO
    (30, 106), // EISCONN
    (31, 21),  // EISDIR
    (32, 40),  // ELOOP
    (33, 24),  // EMFILE
    (34, 31),  // EMLINK
    (35, 90),  // EMSGSIZE
    (36, 72),  // EMULTIHOP
    (37, 36),  // ENAMETOOLONG
    (38, 100), // ENETDOWN
    (39, 102), // ENETRESET
    (40, 101), // ENETUNREACH
    (41, 23),  // ENFILE
    (42, 105), // ENOBUFS
    (43, 19),  // ENODEV
    (44, 2),   // ENOENT
    (45, 8),   // ENOEXEC
    (46, 37),  // ENOLCK
    (47, 67),  // ENOLINK
    (48, 12),  // ENOMEM
    (49, 42),  // ENOMSG
    (50, 92),  // ENOPROTOOPT
    (51, 28),  // ENOSPC
    (52, 38),  // ENOSYS
    (53, 107), // ENOTCONN
    (54, 20),  // ENOTDIR
    (55, 39),  // ENOTEMPTY
    (56, 131), // ENOTRECOVERABLE
    (57, 88),  // ENOTSOCK
    (58, 95),  // ENOTSUP
    (59, 25),  // ENOTTY
    (60, 6),   // ENXIO
    (61, 75),  // EOVERFLOW
    (62, 130), // EOWNERDEAD
    (63, 1),   // EPERM
    (64, 32),  // EPIPE
    (65, 71),  // EPROTO
    (66, 93),  // EPROTONOSUPPORT
    (67, 91),  // EPROTOTYPE
    (68, 34),  // ERANGE
    (69, 30),  // EROFS
    (70, 29),  // ESPIPE
    (71, 3),   // ESRCH
    (72, 116), // ESTALE
    (73, 110), // ETIMEDOUT
    (74, 26),  // ETXTBSY
    (75, 18),  // EXDEV
];

/// `text` (an I/O error's message, ending `(os error CODE)` with WASI's
/// `code`) with Linux's number for the same error. WASI's own
/// `ENOTCAPABLE` (76), which Linux has not, stays as it is.
fn linux_numbered(text: &str, code: i32) -> String {
    let Some(linux) = WASI_TO_LINUX
        .iter()
        .find(|(wasi, _)| *wasi == code)
        .map(|(_, linux)| *linux)
    else {
        return text.to_string();
    };
    match text.strip_suffix(&format!("(os error {code})")) {
        Some(head) => format!("{head}(os error {linux})"),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wasi_errno_numbers_become_linux_ones() {
        assert_eq!(
            linux_numbered("No such file or directory (os error 44)", 44),
            "No such file or directory (os error 2)"
        );
        assert_eq!(
            linux_numbered("Permission denied (os error 2)", 2),
            "Permission denied (os error 13)"
        );
        assert_eq!(
            linux_numbered("Capabilities insufficient (os error 76)", 76),
            "Capabilities insufficient (os error 76)",
            "WASI's own stays"
        );
        assert_eq!(linux_numbered("odd text", 44), "odd text");
        // Every WASI number is listed once, in order, with a Linux number
        // listed once.
        let mut linux: Vec<i32> = WASI_TO_LINUX.iter().map(|(_, l)| *l).collect();
        assert!(
            WASI_TO_LINUX
                .iter()
                .enumerate()
                .all(|(i, (w, _))| *w == i as i32 + 1)
        );
        linux.sort();
        linux.dedup();
        assert_eq!(linux.len(), WASI_TO_LINUX.len());
    }
}
