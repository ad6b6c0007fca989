//! maid-sdk's `#[function]` attribute and `functions!` macro: one named,
//! documented Rust function per Salt function, as extism's `#[plugin_fn]`,
//! instead of one long table of closures. Use them through `maid_sdk`
//! (`maid_sdk::function`, `maid_sdk::functions!`), whose crate docs say
//! how; this crate only writes the `Function::new` / `Function::raw` call.
//!
//! `#[function]` leaves the function as written, so it stays callable (unit
//! tests, one export reusing another), and adds a hidden sibling,
//! `__maid_function_<name>() -> Function`, that `functions![name, ...]`
//! calls. Nothing new is put in the type namespace, so an export may share
//! its name with a module or a crate (`file.replace` next to `mod replace`).

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, FnArg, ItemFn, Lit, LitStr, Meta, Path, Token, Type};

/// Export a function of a maid plugin. See `maid_sdk::function`.
#[proc_macro_attribute]
pub fn function(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = syn::parse_macro_input!(item as ItemFn);
    match expand(attr.into(), item) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// List the functions `#[function]` exported, in manifest order. See
/// `maid_sdk::functions!`.
#[proc_macro]
pub fn functions(input: TokenStream) -> TokenStream {
    let parser = Punctuated::<Path, Token![,]>::parse_terminated;
    let paths = match parser.parse(input) {
        Ok(paths) => paths,
        Err(e) => return e.to_compile_error().into(),
    };
    let builders = paths.into_iter().map(|mut path| {
        if let Some(last) = path.segments.last_mut() {
            last.ident = builder_name(&last.ident);
        }
        quote_spanned!(path.span()=> #path())
    });
    quote!(::std::vec![#(#builders),*]).into()
}

/// The hidden function that builds `fun`'s `Function`.
fn builder_name(fun: &syn::Ident) -> syn::Ident {
    let mut name = format_ident!("__maid_function_{}", fun.unraw());
    name.set_span(fun.span());
    name
}

/// What `#[function(...)]` says.
#[derive(Default)]
struct Options {
    /// The Salt name, when it is not the Rust one (`true`, `try`).
    name: Option<LitStr>,
    /// The argument names, as `Function::new` takes them.
    args: Option<Expr>,
    /// The handler reads the `Call` itself (`*args`, `**kwargs`).
    raw: bool,
}

impl Options {
    fn parse(attr: TokenStream2) -> syn::Result<Self> {
        let mut options = Options::default();
        let parser = syn::meta::parser(|meta| {
            if meta.path.is_ident("raw") {
                options.raw = true;
            } else if meta.path.is_ident("name") {
                options.name = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("args") {
                options.args = Some(meta.value()?.parse()?);
            } else {
                return Err(meta.error("expected `raw`, `name = \"...\"` or `args = [...]`"));
            }
            Ok(())
        });
        parser.parse2(attr)?;
        Ok(options)
    }
}

/// The handler's parameters: at most one argument type and one `&Call`.
/// The call is the reference: arguments are deserialised into an owned
/// type, so a reference can never be one.
struct Params {
    args: bool,
    call: bool,
}

impl Params {
    fn of(item: &ItemFn, raw: bool) -> syn::Result<Self> {
        let mut params = Params {
            args: false,
            call: false,
        };
        let shape = if raw {
            "a raw function takes `(call: &Call)` or nothing"
        } else {
            "a function takes `(args: A, call: &Call)`, `(args: A)`, `(call: &Call)` or nothing"
        };
        for input in &item.sig.inputs {
            let FnArg::Typed(param) = input else {
                return Err(syn::Error::new(input.span(), shape));
            };
            let is_call = matches!(*param.ty, Type::Reference(_));
            if is_call && !params.call {
                params.call = true;
            } else if !is_call && !raw && !params.args && !params.call {
                params.args = true;
            } else {
                return Err(syn::Error::new(param.span(), shape));
            }
        }
        Ok(params)
    }
}

fn expand(attr: TokenStream2, item: ItemFn) -> syn::Result<TokenStream2> {
    let options = Options::parse(attr)?;
    let sig = &item.sig;
    if let Some(bad) = (sig.asyncness.as_ref().map(Spanned::span))
        .or(sig.generics.lt_token.as_ref().map(Spanned::span))
        .or(sig.variadic.as_ref().map(Spanned::span))
    {
        return Err(syn::Error::new(
            bad,
            "an exported function is neither async, generic nor variadic",
        ));
    }
    let params = Params::of(&item, options.raw)?;
    let doc = doc_of(&item.attrs).ok_or_else(|| {
        syn::Error::new(
            sig.ident.span(),
            "document the function with `///`: the comment is its doc in the manifest",
        )
    })??;

    let fun = &sig.ident;
    let vis = &item.vis;
    let builder = builder_name(fun);
    let name = options
        .name
        .unwrap_or_else(|| LitStr::new(&fun.unraw().to_string(), fun.span()));
    let args = match options.args {
        None => quote!(&[]),
        Some(Expr::Array(list)) => quote!(&#list),
        Some(other) => quote!(#other),
    };
    let call_ty = quote!(&::maid_sdk::Call);
    let build = if options.raw {
        let handler = if params.call {
            quote!(#fun)
        } else {
            quote!(|_: #call_ty| #fun())
        };
        quote!(::maid_sdk::Function::raw(#name, #doc, #args, #handler))
    } else {
        let handler = match (params.args, params.call) {
            (true, true) => quote!(#fun),
            (true, false) => quote!(|args, _: #call_ty| #fun(args)),
            (false, true) => quote!(|(): (), call: #call_ty| #fun(call)),
            (false, false) => quote!(|(): (), _: #call_ty| #fun()),
        };
        quote!(::maid_sdk::Function::new(#name, #doc, #args, #handler))
    };
    Ok(quote! {
        #item

        #[doc(hidden)]
        #vis fn #builder() -> ::maid_sdk::Function {
            #build
        }
    })
}

/// The doc comment's text, as the manifest carries it: `/// Greet someone.`
/// is `#[doc = " Greet someone."]`; one leading space comes off each line,
/// lines join with `\n`, and trailing newlines go. `None` without one.
fn doc_of(attrs: &[Attribute]) -> Option<syn::Result<String>> {
    let mut lines = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("doc")) {
        // `#[doc(hidden)]` and the like say nothing about the function.
        let Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        let Expr::Lit(syn::ExprLit {
            lit: Lit::Str(text),
            ..
        }) = &nv.value
        else {
            return Some(Err(syn::Error::new(
                nv.value.span(),
                "an exported function's doc must be a literal (`///`)",
            )));
        };
        lines.push(text.value());
    }
    if lines.is_empty() {
        return None;
    }
    Some(Ok(join_doc(&lines)))
}

fn join_doc(attrs: &[String]) -> String {
    let lines: Vec<&str> = attrs
        .iter()
        .flat_map(|a| a.split('\n'))
        .map(|line| line.strip_prefix(' ').unwrap_or(line))
        .collect();
    lines.join("\n").trim_end_matches('\n').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(attrs: &[&str]) -> String {
        join_doc(&attrs.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn one_space_comes_off_each_line() {
        assert_eq!(doc(&[" Greet someone"]), "Greet someone");
        assert_eq!(doc(&[" a", "   indented", ""]), "a\n  indented");
        assert_eq!(doc(&["no space"]), "no space");
        assert_eq!(doc(&[" a", "", " b"]), "a\n\nb");
    }

    #[test]
    fn block_comments_split_into_lines() {
        assert_eq!(doc(&[" a\n b\n"]), "a\nb");
    }

    #[test]
    fn options_parse() {
        let o = Options::parse(quote!(raw, name = "false", args = ["*args"])).unwrap();
        assert!(o.raw);
        assert_eq!(o.name.unwrap().value(), "false");
        assert!(matches!(o.args, Some(Expr::Array(_))));
        assert!(Options::parse(quote!(nmae = "x")).is_err());
    }

    #[test]
    fn the_call_is_the_reference() {
        let item: ItemFn = syn::parse_quote!(
            fn f(a: A, c: &Call) {}
        );
        let p = Params::of(&item, false).unwrap();
        assert!(p.args && p.call);
        let item: ItemFn = syn::parse_quote!(
            fn f(c: &Call, a: A) {}
        );
        assert!(Params::of(&item, false).is_err());
        let item: ItemFn = syn::parse_quote!(
            fn f(a: A) {}
        );
        assert!(Params::of(&item, true).is_err());
    }
}
