//! Write maid plugins: Salt execution modules that run as sandboxed
//! WebAssembly components inside the maid agent.
//!
//! A plugin is one Salt module (`test`, `cmd`, `cp`, or your own). You write
//! a type that implements [`Plugin`], list its functions with typed
//! arguments, and export it with [`export_plugin!`]. This crate is the only
//! dependency you need: it generates the bindings from the project's one WIT
//! package (`maid:plugin@0.1.0`) and re-exports what they need.
//!
//! ```
//! use maid_sdk::{Call, Capability, Error, Function, Plugin, export_plugin, host};
//! use serde::Deserialize;
//!
//! /// The `hello` module.
//! struct Hello;
//!
//! #[derive(Deserialize)]
//! struct GreetArgs {
//!     name: String,
//!     #[serde(default)]
//!     shout: bool,
//! }
//!
//! impl Plugin for Hello {
//!     const MODULE: &'static str = "hello";
//!     const VERSION: &'static str = "1.0.0";
//!     const CAPABILITIES: &'static [Capability] = &[Capability::Exec];
//!
//!     fn functions() -> Vec<Function> {
//!         vec![
//!             // `hello.greet world shout=true` -> "HELLO, WORLD"
//!             Function::new("greet", "Greet someone", &["name", "shout"],
//!                 |args: GreetArgs, _call: &Call| {
//!                     let greeting = format!("hello, {}", args.name);
//!                     Ok(if args.shout { greeting.to_uppercase() } else { greeting })
//!                 }),
//!             // `hello.uname` -> the output of `uname -s`, through the host's
//!             // exec capability (which the agent's config must grant).
//!             Function::new("uname", "Name the kernel", &[], |(): (), _call: &Call| {
//!                 let out = host::Command::new("uname").arg("-s").output()?;
//!                 if out.retcode != 0 {
//!                     return Err(Error::failed(out.stderr_lossy(), out.retcode));
//!                 }
//!                 Ok(out.stdout_lossy().trim_end().to_string())
//!             }),
//!         ]
//!     }
//! }
//!
//! export_plugin!(Hello);
//! # fn main() {}
//! ```
//!
//! Build it with `cargo build --target wasm32-wasip2 --release` and put the
//! `.wasm` in the agent's plugin directory as `hello.wasm`: the file stem must
//! equal [`Plugin::MODULE`].
//!
//! # Arguments
//!
//! A job carries positional arguments and keyword arguments, as Salt's do.
//! [`Function::new`] binds them to the argument names you list, in order
//! (`hello.greet world` and `hello.greet name=world` are the same call), and
//! deserialises the result into your type with serde, so missing or
//! mistyped arguments come back to the master as Salt's
//! `Passed invalid arguments: ...` return. Functions that take any arguments
//! (Salt's `*args` / `**kwargs`) use [`Function::raw`] and read [`Call`].
//!
//! # Failing
//!
//! Return an [`Error`]: [`Error::bad_arguments`], [`Error::denied`], or
//! [`Error::failed`] with the retcode the job should end with. To return a
//! value *and* a non-zero retcode (as `cmd.retcode` does) call
//! [`host::set_retcode`]. A panic is caught by the agent and returned as
//! `Plugin error: ...` with the panic message.

// The generated bindings name this crate by its public path, so plugins
// that only depend on the SDK resolve them; let that path work in here too.
extern crate self as maid_sdk;

/// Users and groups from `/etc/passwd` and `/etc/group`, one reader for
/// every plugin that reports accounts.
pub mod accounts;
mod error;
pub mod fs;
mod function;
pub mod host;
pub mod salt;

/// Python's `str()` and `repr()` of JSON values, as Salt prints them
/// (`test.arg_repr`, messages that quote a value). The same code the
/// master's outputters use.
pub use maid_salt::python;

pub use error::{Error, ErrorKind};
pub use function::{Call, Function, split_default};
pub use serde;
pub use serde_json;
pub use wit_bindgen;

/// Bindings generated from `wit/plugin.wit`. Plugin authors rarely need
/// these directly; the rest of the crate wraps them.
#[doc(hidden)]
#[allow(clippy::too_many_arguments)] // generated code
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "plugin",
        pub_export_macro: true,
        export_macro_name: "__export_plugin_world",
        default_bindings_module: "maid_sdk::bindings",
        runtime_path: "maid_sdk::wit_bindgen::rt",
    });
}

pub use bindings::maid::plugin::types::{Capability, Context, FunctionInfo, Manifest};

use serde_json::{Map, Value};

/// One Salt execution module.
///
/// Only [`MODULE`](Plugin::MODULE) and [`functions`](Plugin::functions) are
/// required; the rest have defaults that fit almost every plugin.
pub trait Plugin: 'static {
    /// The Salt module name, e.g. `"cmd"`. The agent refuses a plugin whose
    /// file is not named `<MODULE>.wasm`.
    const MODULE: &'static str;

    /// The plugin's version, reported in its manifest.
    const VERSION: &'static str = "0.0.0";

    /// The host capabilities this plugin needs. The agent's configuration
    /// must also grant them; a call can use only what is both asked for and
    /// granted.
    const CAPABILITIES: &'static [Capability] = &[];

    /// The module's functions.
    fn functions() -> Vec<Function>;

    /// The manifest the agent reads when it loads the plugin.
    fn describe() -> Manifest {
        Manifest {
            module: Self::MODULE.to_string(),
            version: Self::VERSION.to_string(),
            functions: Self::functions().iter().map(Function::info).collect(),
            capabilities: Self::CAPABILITIES.to_vec(),
        }
    }

    /// Run one function. The default finds it in [`functions`](Plugin::functions)
    /// and binds its arguments.
    fn call(function: &str, call: Call) -> Result<Value, Error> {
        let functions = Self::functions();
        match functions.iter().find(|f| f.name() == function) {
            Some(f) => f.invoke(&call),
            None => Err(Error::failed(
                format!("'{}.{function}' is not available.", Self::MODULE),
                254,
            )),
        }
    }
}

/// Export a [`Plugin`] as the component's `describe` and `call`.
///
/// Use it once per plugin crate, at the crate root: `export_plugin!(MyModule);`
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[doc(hidden)]
        struct __MaidPluginExport;

        impl $crate::bindings::Guest for __MaidPluginExport {
            fn describe() -> $crate::Manifest {
                <$plugin as $crate::Plugin>::describe()
            }

            fn call(
                function: ::std::string::String,
                args: ::std::string::String,
                kwargs: ::std::string::String,
                ctx: $crate::Context,
            ) -> ::std::result::Result<::std::string::String, $crate::bindings::maid::plugin::types::Error>
            {
                $crate::__private::call::<$plugin>(&function, &args, &kwargs, ctx)
            }
        }

        $crate::bindings::__export_plugin_world!(__MaidPluginExport with_types_in $crate::bindings);
    };
}

#[doc(hidden)]
pub mod __private {
    use super::*;

    /// Decode the JSON the host sent, run the function, encode its return.
    pub fn call<P: Plugin>(
        function: &str,
        args: &str,
        kwargs: &str,
        ctx: Context,
    ) -> Result<String, bindings::maid::plugin::types::Error> {
        let run = || -> Result<Value, Error> {
            let args: Vec<Value> = serde_json::from_str(args)
                .map_err(|e| Error::bad_arguments(format!("args must be a JSON array: {e}")))?;
            let kwargs: Map<String, Value> = serde_json::from_str(kwargs)
                .map_err(|e| Error::bad_arguments(format!("kwargs must be a JSON object: {e}")))?;
            let call = Call {
                module: P::MODULE,
                function: function.to_string(),
                args,
                kwargs,
                context: ctx,
            };
            P::call(function, call)
        };
        let value = run().map_err(Error::into_wit)?;
        serde_json::to_string(&value)
            .map_err(|e| Error::failed(format!("return is not JSON: {e}"), 1).into_wit())
    }
}
