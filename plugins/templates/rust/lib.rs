//! The `@NAME@` module: a maid plugin written in Rust.
//!
//! Each [`Function`] is a Salt function `@NAME@.<name>`; its arguments are
//! bound by name and position into a serde type, and what it returns is
//! sent back as JSON. See docs/plugin-guide.md in the maid repository.

use maid_sdk::{Call, Error, Function, Plugin, export_plugin, host};
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

/// `@NAME@.greet world shout=true` -> "HELLO, WORLD"
pub fn greet(args: Greet) -> Result<String, Error> {
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
        vec![Function::new(
            "greet",
            "Greet someone: @NAME@.greet world shout=true",
            &["name", "shout"],
            |args: Greet, _call: &Call| {
                host::log(host::Level::Info, &format!("greeting {}", args.name));
                greet(args)
            },
        )]
    }
}

export_plugin!(Module);

#[cfg(test)]
mod tests {
    use super::*;

    fn greet_(name: &str, shout: bool) -> Result<String, Error> {
        greet(Greet {
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
