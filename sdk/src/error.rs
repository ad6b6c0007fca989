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
        if denied {
            Error::denied(err.to_string())
        } else {
            Error::failed(err.to_string(), 1)
        }
    }
}
