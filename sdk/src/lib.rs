//! Write maid plugins: Salt execution modules that run as sandboxed
//! WebAssembly components inside the maid agent.
//!
//! A plugin is one Salt module (`test`, `cmd`, `cp`, or your own). You write
//! a type that implements [`Plugin`], one Rust function per Salt function
//! marked [`#[function]`](function), list them with [`functions!`], and
//! export the module with [`export_plugin!`]. This crate is the only
//! dependency you need: it generates the bindings from the project's one WIT
//! package (`maid:plugin@0.1.0`) and re-exports what they need.
//!
//! ```
//! use maid_sdk::{Call, Capability, Error, Function, Plugin, export_plugin, function, host};
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
//! /// Greet someone
//! // `hello.greet world shout=true` -> "HELLO, WORLD"
//! #[function(args = ["name", "shout"])]
//! fn greet(args: GreetArgs) -> Result<String, Error> {
//!     let greeting = format!("hello, {}", args.name);
//!     Ok(if args.shout { greeting.to_uppercase() } else { greeting })
//! }
//!
//! /// Name the kernel
//! // `hello.uname` -> the output of `uname -s`, through the host's exec
//! // capability (which the agent's config must grant).
//! #[function]
//! fn uname() -> Result<String, Error> {
//!     let out = host::Command::new("uname").arg("-s").output()?;
//!     if out.retcode != 0 {
//!         return Err(Error::failed(out.stderr_lossy(), out.retcode));
//!     }
//!     Ok(out.stdout_lossy().trim_end().to_string())
//! }
//!
//! /// Return the arguments given
//! // `hello.args 1 a=b` -> {"args": [1], "kwargs": {"a": "b"}}: Salt's
//! // `*args` and `**kwargs`, read from the raw call.
//! #[function(raw, name = "args", args = ["*args", "**kwargs"])]
//! fn args_(call: &Call) -> Result<serde_json::Value, Error> {
//!     let kwargs: serde_json::Map<_, _> =
//!         call.user_kwargs().map(|(k, v)| (k.clone(), v.clone())).collect();
//!     Ok(serde_json::json!({"args": call.args, "kwargs": kwargs}))
//! }
//!
//! impl Plugin for Hello {
//!     const MODULE: &'static str = "hello";
//!     const VERSION: &'static str = "1.0.0";
//!     const CAPABILITIES: &'static [Capability] = &[Capability::Exec];
//!
//!     fn functions() -> Vec<Function> {
//!         maid_sdk::functions![greet, uname, args_]
//!     }
//! }
//!
//! export_plugin!(Hello);
//! # fn main() {
//! #     let names: Vec<_> = Hello::functions().iter().map(Function::info).collect();
//! #     assert_eq!(names[0].name, "greet");
//! #     assert_eq!(names[0].doc, "Greet someone");
//! #     assert_eq!(names[0].args, ["name", "shout"]);
//! #     assert_eq!(names[2].name, "args");
//! # }
//! ```
//!
//! Build it with `cargo build --target wasm32-wasip2 --release` and put the
//! `.wasm` in the agent's plugin directory as `hello.wasm`: the file stem must
//! equal [`Plugin::MODULE`].
//!
//! # Functions
//!
//! [`#[function]`](function) leaves the function as you wrote it (so unit
//! tests and other functions can still call it) and adds the [`Function`]
//! the manifest lists:
//!
//! * its **name** is the Rust name, or `name = "..."` for a Salt name Rust
//!   cannot spell or that you would rather not (`true`, `try`, `exception`);
//! * its **doc** is the `///` comment, byte for byte: one leading space off
//!   each line, lines joined with `\n`. `maid plugin inspect` and
//!   `sys.doc` show it, so keep notes for the reader in `//` comments;
//! * its **args** are `args = ["name", "count=1", ...]` (or a constant of
//!   type `&[&str]`), Salt's argument names in positional order, with
//!   defaults as JSON after `=`; none when left out.
//!
//! The parameters say how the call reaches the function: `(args: A, call:
//! &Call)`, `(args: A)`, `(call: &Call)` or `()`, where `A` is the serde
//! type the arguments bind into (see below) and the `&Call` is the job's
//! call. With `raw` the arguments are not bound: the function takes `(call:
//! &Call)` or `()` and reads [`Call::args`] and [`Call::kwargs`] itself. It
//! returns `Result<R, Error>` for any `R` serde can serialise.
//!
//! [`functions!`] lists the marked functions in manifest order:
//! `functions![greet, uname, files::read]` (a function in another module by
//! its path). A function marked but not listed is dead code, and the
//! compiler warns about it; one listed but not marked is an error naming
//! `__maid_function_<name>`.
//!
//! # Arguments
//!
//! A job carries positional arguments and keyword arguments, as Salt's do.
//! A function binds them to the argument names it lists, in order
//! (`hello.greet world` and `hello.greet name=world` are the same call), and
//! deserialises the result into your type with serde, so missing or
//! mistyped arguments come back to the master as Salt's
//! `Passed invalid arguments: ...` return. Functions that take any arguments
//! (Salt's `*args` / `**kwargs`) are `raw` and read [`Call`]. Underneath,
//! these are [`Function::new`] and [`Function::raw`], which you can also
//! call yourself.
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
/// Nested keys read as Salt's `traverse_dict_and_list` reads them, and
/// Salt's dictionary merges.
pub use maid_salt::{data, dictupdate};

pub use error::{Error, ErrorKind};
pub use function::{Call, Function, split_default};
/// Export a Rust function as one of the module's functions; see
/// [Functions](crate#functions).
pub use maid_sdk_macros::function;
/// The [`#[function]`](function)s of a module, in manifest order: the body
/// of [`Plugin::functions`].
pub use maid_sdk_macros::functions;
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
