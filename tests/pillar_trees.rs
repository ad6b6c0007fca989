//! Pillar compiled by the master as Salt compiles it: each tree below
//! (top files per environment, includes, merges, Jinja on grains, the
//! errors Salt reports) is compiled by `maid_master::pillar` and by Salt
//! 3008.4's own `Pillar.compile_pillar` — the call `salt-call --local
//! pillar.items` makes — with the same roots, grains and settings, and
//! the two pillars must be equal.

use std::path::Path;

use serde_json::{Map, Value, json};

use maid_master::pillar::{self, Request, Settings};

/// One pillar tree: its files (`env/path`), who compiles it, and how.
struct Tree {
    name: &'static str,
    files: &'static [(&'static str, &'static str)],
    id: &'static str,
    grains: Value,
    /// Salt's options: `pillar_source_merging_strategy`,
    /// `pillar_merge_lists`, `nodegroups`.
    opts: Value,
    saltenv: Option<&'static str>,
    pillarenv: Option<&'static str>,
    pillar_override: Value,
}

fn tree(name: &'static str, files: &'static [(&'static str, &'static str)]) -> Tree {
    Tree {
        name,
        files,
        id: "web1",
        grains: json!({"id": "web1", "os": "Debian", "os_family": "Debian",
                       "roles": ["web", "cache"], "num_cpus": 2,
                       "ip4_interfaces": {"eth0": ["10.0.0.5"]}}),
        opts: json!({}),
        saltenv: None,
        pillarenv: None,
        pillar_override: json!({}),
    }
}

impl Tree {
    fn id(mut self, id: &'static str) -> Self {
        self.id = id;
        self.grains["id"] = json!(id);
        self
    }
    fn grain(mut self, k: &str, v: Value) -> Self {
        self.grains[k] = v;
        self
    }
    fn opt(mut self, k: &str, v: Value) -> Self {
        self.opts[k] = v;
        self
    }
}

fn trees() -> Vec<Tree> {
    vec![
        tree("one sls for everyone", &[
            ("base/top.sls", "base:\n  '*':\n    - common\n"),
            ("base/common.sls", "motd: hello\nntp:\n  servers: [a, b]\n"),
        ]),
        tree("globs on the id", &[
            ("base/top.sls", "base:\n  'web*':\n    - web\n  'db*':\n    - db\n  '*':\n    - common\n"),
            ("base/web.sls", "role: web\nport: 80\n"),
            ("base/db.sls", "role: db\npassword: s3cret\n"),
            ("base/common.sls", "role: none\n"),
        ]),
        tree("globs on the id, another minion", &[
            ("base/top.sls", "base:\n  'web*':\n    - web\n  'db*':\n    - db\n"),
            ("base/web.sls", "role: web\n"),
            ("base/db.sls", "role: db\npassword: s3cret\n"),
        ]).id("db1"),
        tree("grain, list, pcre and compound matchers", &[
            ("base/top.sls", "base:\n  'os:Debian':\n    - match: grain\n    - debian\n  'os:RedHat':\n    - match: grain\n    - redhat\n  'web1,web2':\n    - match: list\n    - listed\n  'w.b\\d':\n    - match: pcre\n    - pcre\n  'G@roles:cache and not db*':\n    - compound\n"),
            ("base/debian.sls", "pkg: apt\n"),
            ("base/redhat.sls", "pkg: dnf\n"),
            ("base/listed.sls", "listed: true\n"),
            ("base/pcre.sls", "pcre: true\n"),
            ("base/compound.sls", "compound: yes\n"),
        ]),
        tree("grain, list, pcre and compound matchers, another minion", &[
            ("base/top.sls", "base:\n  'os:Debian':\n    - match: grain\n    - debian\n  'os:RedHat':\n    - match: grain\n    - redhat\n  'G@roles:cache and not db*':\n    - compound\n"),
            ("base/debian.sls", "pkg: apt\n"),
            ("base/redhat.sls", "pkg: dnf\n"),
            ("base/compound.sls", "compound: yes\n"),
        ]).id("db2").grain("os", json!("RedHat")),
        tree("nodegroups", &[
            ("base/top.sls", "base:\n  webs:\n    - match: nodegroup\n    - webs\n  others:\n    - match: nodegroup\n    - others\n  'N@webs and G@os:Debian':\n    - both\n"),
            ("base/webs.sls", "group: webs\n"),
            ("base/others.sls", "group: others\n"),
            ("base/both.sls", "both: 1\n"),
        ]).opt("nodegroups", json!({"webs": "web*", "others": "L@db1,db2"})),
        tree("includes: the including file wins", &[
            ("base/top.sls", "base:\n  '*':\n    - app\n"),
            ("base/app.sls", "include:\n  - defaults\nport: 8080\nsettings:\n  debug: false\n"),
            ("base/defaults.sls", "port: 80\nname: app\nsettings:\n  debug: true\n  workers: 4\n"),
        ]),
        tree("relative includes from init.sls and from a file", &[
            ("base/top.sls", "base:\n  '*':\n    - app\n    - app.extra\n"),
            ("base/app/init.sls", "include:\n  - .db\nfrom_init: 1\n"),
            ("base/app/db.sls", "db: 1\n"),
            ("base/app/extra.sls", "include:\n  - .more\nextra: 1\n"),
            ("base/app/more.sls", "more: 1\n"),
        ]),
        tree("include with defaults and key", &[
            ("base/top.sls", "base:\n  '*':\n    - main\n"),
            ("base/main.sls", "include:\n  - users:\n      defaults:\n        shell: /bin/zsh\n      key: accounts:local\n  - plain\n"),
            ("base/users.sls", "alice:\n  shell: {{ shell }}\n"),
            ("base/plain.sls", "plain: {{ shell | default('none') }}\n"),
        ]),
        tree("globs in top and in include", &[
            ("base/top.sls", "base:\n  '*':\n    - users.*\n"),
            ("base/users/alice.sls", "users:\n  alice: 1000\n"),
            ("base/users/bob.sls", "users:\n  bob: 1001\n"),
            ("base/roles.sls", "include:\n  - users.*\n"),
        ]),
        tree("a nested merge", &[
            ("base/top.sls", "base:\n  '*':\n    - a\n    - b\n"),
            ("base/a.sls", "app:\n  ports: [80]\n  opts:\n    x: 1\n    y: 1\n"),
            ("base/b.sls", "app:\n  ports: [443]\n  opts:\n    y: 2\n    z: 2\n"),
        ]),
        tree("pillar_merge_lists", &[
            ("base/top.sls", "base:\n  '*':\n    - a\n    - b\n"),
            ("base/a.sls", "app:\n  ports: [80, 8080]\n"),
            ("base/b.sls", "app:\n  ports: [443, 80]\n"),
        ]).opt("pillar_merge_lists", json!(true)),
        tree("strategy overwrite", &[
            ("base/top.sls", "base:\n  '*':\n    - a\n    - b\n"),
            ("base/a.sls", "app:\n  opts:\n    x: 1\n    y: 1\n"),
            ("base/b.sls", "app:\n  opts:\n    y: 2\n"),
        ]).opt("pillar_source_merging_strategy", json!("overwrite")),
        tree("strategy list", &[
            ("base/top.sls", "base:\n  '*':\n    - a\n    - b\n"),
            ("base/a.sls", "k: 1\nonly_a: 1\n"),
            ("base/b.sls", "k: 2\nonly_b: 2\n"),
        ]).opt("pillar_source_merging_strategy", json!("list")),
        tree("strategy none reads only the run's environment", &[
            ("base/top.sls", "base:\n  '*':\n    - a\n"),
            ("base/a.sls", "k: 1\n"),
            ("dev/top.sls", "dev:\n  '*':\n    - d\n"),
            ("dev/d.sls", "k: dev\n"),
        ]).opt("pillar_source_merging_strategy", json!("none")),
        tree("Jinja on grains", &[
            ("base/top.sls", "base:\n  '*':\n    - jinja\n"),
            ("base/jinja.sls", "{% if grains['os'] == 'Debian' %}\npkg: apache2\n{% else %}\npkg: httpd\n{% endif %}\nroles:\n{% for r in grains['roles'] %}\n  - {{ r }}\n{% endfor %}\ncpus: {{ grains.num_cpus * 2 }}\nos: {{ salt['grains.get']('os') }}\nip: {{ salt['grains.get']('ip4_interfaces:eth0')[0] }}\nmissing: {{ salt['grains.get']('nope', 'fallback') }}\nid: {{ grains.id | upper }}\nenv: {{ saltenv }}\n"),
        ]),
        tree("import_yaml and from-import of a macro file", &[
            ("base/top.sls", "base:\n  '*':\n    - mapped\n"),
            ("base/map.yaml", "Debian:\n  pkg: apache2\nRedHat:\n  pkg: httpd\n"),
            ("base/macros.jinja", "{% macro port(n) %}{{ n * 10 }}{% endmacro %}\n{% set colour = 'blue' %}\n"),
            ("base/mapped.sls", "{% import_yaml 'map.yaml' as map %}\n{% from 'macros.jinja' import port, colour %}\npkg: {{ map[grains.os].pkg }}\nport: {{ port(8) }}\ncolour: {{ colour }}\n"),
        ]),
        tree("missing SLS, listed and ignored", &[
            ("base/top.sls", "base:\n  '*':\n    - nope\n    - here\n  'web*':\n    - gone\n    - ignore_missing: true\n"),
            ("base/here.sls", "here: 1\n"),
        ]),
        tree("render errors say only where", &[
            ("base/top.sls", "base:\n  '*':\n    - badyaml\n    - badjinja\n    - dupkeys\n    - good\n"),
            ("base/badyaml.sls", "a: [1, 2\nb: }\n"),
            ("base/badjinja.sls", "a: {{ nope.missing }}\n"),
            ("base/dupkeys.sls", "a: 1\na: 2\n"),
            ("base/good.sls", "good: yes\n"),
        ]),
        tree("data that is not a dictionary", &[
            ("base/top.sls", "base:\n  '*':\n    - alist\n    - ascalar\n    - notlist\n    - empty\n    - comments\n"),
            ("base/alist.sls", "- a\n- b\n"),
            ("base/ascalar.sls", "just words\n"),
            ("base/notlist.sls", "include: other\nk: 1\n"),
            ("base/other.sls", "o: 1\n"),
            ("base/empty.sls", ""),
            ("base/comments.sls", "# nothing here\n"),
        ]),
        tree("environments: every top file, every section", &[
            ("base/top.sls", "base:\n  '*':\n    - common\ndev:\n  '*':\n    - fromtop\n"),
            ("base/common.sls", "where: base\nbase_only: 1\n"),
            ("dev/top.sls", "dev:\n  'web*':\n    - devweb\nbase:\n  '*':\n    - common\n    - extra\n"),
            ("dev/devweb.sls", "where: dev\n"),
            ("dev/fromtop.sls", "fromtop: 1\n"),
            ("base/extra.sls", "extra: 1\n"),
        ]),
        tree("pillarenv reads one environment", &[
            ("base/top.sls", "base:\n  '*':\n    - common\n"),
            ("base/common.sls", "where: base\n"),
            ("dev/top.sls", "dev:\n  '*':\n    - devonly\n"),
            ("dev/devonly.sls", "where: dev\n"),
        ]),
        tree("an environment no root serves", &[
            ("base/top.sls", "base:\n  '*':\n    - common\nqa:\n  '*':\n    - qa\n"),
            ("base/common.sls", "c: 1\n"),
        ]),
        tree("order and a target named twice", &[
            ("base/top.sls", "base:\n  'web*':\n    - late\n    - order: 10\n  '*':\n    - early\n    - order: 1\n"),
            ("base/late.sls", "k: late\n"),
            ("base/early.sls", "k: early\n"),
            ("dev/top.sls", "base:\n  'web*':\n    - replaced\n"),
            ("base/replaced.sls", "replaced: 1\n"),
        ]),
        tree("a top file that includes another", &[
            ("base/top.sls", "include:\n  - moretop\nbase:\n  '*':\n    - common\n"),
            ("base/moretop.sls", "base:\n  'web*':\n    - web\n"),
            ("base/common.sls", "c: 1\n"),
            ("base/web.sls", "w: 1\n"),
        ]),
        tree("a top file that does not render", &[
            ("base/top.sls", "base:\n  '*':\n    - common\n{% if %}\n"),
            ("base/common.sls", "c: 1\n"),
        ]),
        tree("renderer lines", &[
            ("base/top.sls", "#!yaml\nbase:\n  '*':\n    - asjson\n    - asyaml\n"),
            ("base/asjson.sls", "#!jinja|json\n{\"j\": \"{{ grains.os }}\", \"n\": [1, 2]}\n"),
            ("base/asyaml.sls", "#!yaml\ny: \"{{ not rendered }}\"\n"),
        ]),
        tree("YAML 1.1 scalars", &[
            ("base/top.sls", "base:\n  '*':\n    - scalars\n"),
            ("base/scalars.sls", "on: yes\noff: no\noctal: 0755\nfloat: 1e3\nnull_: ~\ndate: 2024-01-02\nstr: '0755'\n"),
        ]),
        tree("inline pillar over the compiled", &[
            ("base/top.sls", "base:\n  '*':\n    - app\n"),
            ("base/app.sls", "app:\n  port: 80\n  name: x\n"),
        ]),
    ]
    .into_iter()
    .map(|t| match t.name {
        "pillarenv reads one environment" => Tree {
            pillarenv: Some("dev"),
            ..t
        },
        "strategy none reads only the run's environment" => Tree {
            saltenv: Some("dev"),
            ..t
        },
        "inline pillar over the compiled" => Tree {
            pillar_override: json!({"app": {"port": 443}, "extra": [1]}),
            ..t
        },
        _ => t,
    })
    .collect()
}

/// Salt's render errors carry the exception's own text after their
/// first line; maid's renderer words it otherwise. The first line (which
/// file, which kind of failure) is compared.
fn first_lines(mut pillar: Value) -> Value {
    if let Some(Value::Array(errors)) = pillar.get_mut("_errors") {
        for e in errors.iter_mut() {
            if let Some(s) = e.as_str() {
                *e = json!(s.lines().next().unwrap_or(""));
            }
        }
    }
    pillar
}

fn write(root: &Path, files: &[(&str, &str)]) -> Map<String, Value> {
    let mut roots = Map::new();
    for (path, text) in files {
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, text).unwrap();
        let env = path.split('/').next().unwrap();
        roots.insert(env.into(), json!([root.join(env)]));
    }
    if !roots.contains_key("base") {
        roots.insert("base".into(), json!([root.join("base")]));
    }
    roots
}

#[test]
fn pillar_trees_compile_as_salts_master_compiles_them() {
    let trees = trees();
    assert!(trees.len() >= 20, "{} trees", trees.len());
    let tmp = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    let mut ours = Vec::new();
    for (i, t) in trees.iter().enumerate() {
        let root = tmp.path().join(i.to_string());
        let roots = write(&root, t.files);
        cases.push(json!({
            "pillar_roots": roots, "id": t.id, "grains": t.grains, "opts": t.opts,
            "saltenv": t.saltenv, "pillarenv": t.pillarenv,
            "pillar_override": t.pillar_override,
        }));
        let master: maid_config::MasterSettings = serde_json::from_value(json!({
            "pillar_roots": roots,
            "pillar_source_merging_strategy":
                t.opts.get("pillar_source_merging_strategy").unwrap_or(&json!("smart")),
            "pillar_merge_lists": t.opts.get("pillar_merge_lists").unwrap_or(&json!(false)),
            "nodegroups": t.opts.get("nodegroups").unwrap_or(&json!({})),
        }))
        .unwrap();
        let settings = Settings::from_config(&master);
        let req = Request {
            id: t.id.into(),
            grains: t.grains.as_object().unwrap().clone(),
            saltenv: t.saltenv.map(String::from),
            pillarenv: t.pillarenv.map(String::from),
            pillar_override: t.pillar_override.as_object().unwrap().clone(),
        };
        ours.push(json!({"pillar": first_lines(Value::Object(pillar::compile(&settings, &req)))}));
    }
    let salt = crate::common::salt::oracle("pillar", &json!({ "cases": cases }));
    let salt = salt.as_array().expect("the oracle answers a list");
    let mut differ = Vec::new();
    for ((t, salt), maid) in trees.iter().zip(salt).zip(&ours) {
        let salt = match salt.get("pillar") {
            Some(p) => json!({"pillar": first_lines(p.clone())}),
            None => salt.clone(),
        };
        if std::env::var_os("PILLAR_DEBUG").is_some() {
            eprintln!("{}: {salt}", t.name);
        }
        if &salt != maid {
            differ.push(format!("{}:\n  salt: {salt}\n  maid: {maid}", t.name));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} trees differ from Salt's:\n{}",
        differ.len(),
        trees.len(),
        differ.join("\n")
    );
}
