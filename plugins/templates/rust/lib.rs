//! The `@NAME@` module: a maid plugin written in Rust.
//!
//! Each `#[function]` is a Salt function `@NAME@.<name>`, documented by its
//! `///` comment; its arguments are bound by name and position into a serde
//! type, and what it returns is sent back as JSON. See docs/plugin-guide.md
//! in the maid repository.

use maid_sdk::{Error, Function, Plugin, export_plugin, function, host};
use serde::Deserialize;

/// The `@NAME@` module.
pub struct Module;

/// The arguments of `@NAME@.greet`.
#[derive(Deserialize)]
pub struct Greet {
    name: String,
    #[serde(default)]
    shout: bool,
}

/// Greet someone: @NAME@.greet world shout=true
#[function(args = ["name", "shout"])]
pub fn greet(args: Greet) -> Result<String, Error> {
    host::log(host::Level::Info, &format!("greeting {}", args.name));
    greeting(args)
}

/// `@NAME@.greet world shout=true` -> "HELLO, WORLD". No host calls here,
/// so the unit tests below run it on any machine.
pub fn greeting(args: Greet) -> Result<String, Error> {
    if args.name.is_empty() {
        return Err(Error::failed("name must not be empty", 1));
    }
    let greeting = format!("hello, {}", args.name);
    Ok(if args.shout {
        greeting.to_uppercase()
    } else {
        greeting
    })
}

impl Plugin for Module {
    const MODULE: &'static str = "@NAME@";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn functions() -> Vec<Function> {
        maid_sdk::functions![greet]
    }
}

export_plugin!(Module);

#[cfg(test)]
mod tests {
    use super::*;

    fn greet_(name: &str, shout: bool) -> Result<String, Error> {
        greeting(Greet {
            name: name.into(),
            shout,
        })
    }

    #[test]
    fn greets() {
        assert_eq!(greet_("world", false).unwrap(), "hello, world");
        assert_eq!(greet_("world", true).unwrap(), "HELLO, WORLD");
    }

    #[test]
    fn an_empty_name_fails() {
        assert!(greet_("", false).is_err());
    }
}
