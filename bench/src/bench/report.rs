//! The report of `maid-bench run`: its tables, as text for the terminal
//! and as Markdown for BENCHMARKS.md, and the notes under them (the
//! machine, the command, what was skipped).
//!
//! BENCHMARKS.md and the test suite read these rows by their wording, so
//! the labels, the columns and their order are a format: one function per
//! table keeps each in one place.

use std::time::Duration;

use super::goals::goals;
use super::master::TgtType;
use super::measure::{MeanOf, Measured, percentile, sorted};
use super::procfs::machine;
use super::results::{MAID, PROTOCOL, RAW, Results, median_kib};
use super::run::Sizes;
use super::table::{Table, fmt_count, fmt_dur, fmt_mb, fmt_ratio, fmt_signed_us};

use maid_testkit::redis::redis_server_bin;

/// The whole report: every table, then the notes, as text and as Markdown.
pub(super) fn render(r: &Results, sizes: &Sizes) -> (String, String) {
    let (t1, t2, t3, floors, t4) = (
        responders_table(r),
        goals_table(r),
        other_table(r),
        floors_table(r),
        agent_table(r),
    );
    let notes = notes(r, sizes);
    let mut tables = vec![&t1, &t2, &t3, &floors];
    if r.agent_metrics {
        tables.push(&t4);
    }
    let mut text = String::new();
    let mut md = String::new();
    for t in tables {
        text.push_str(&t.text());
        text.push('\n');
        md.push_str(&t.markdown());
        md.push('\n');
    }
    for n in &notes {
        text.push_str(n);
        text.push('\n');
        md.push_str(&format!("- {n}\n"));
    }
    (text, md)
}

/// The round trips, throughput, CPU and memory of raw, the protocol
/// floor, maid, maid with its audit trail on (file and stream), maid
/// signed and the seed, side by side.
fn responders_table(r: &Results) -> Table {
    let cell = |name: &str, f: &dyn Fn(&Measured) -> String| {
        r.measured(name).map(f).unwrap_or_else(|| "n/a".into())
    };
    let names = ["raw", "protocol", "maid", "audited", "signed", "seed"];

    let mut t1 = Table::new(
        "Round trip (master publish → last reply), test.ping",
        &[
            "",
            "raw",
            "protocol floor",
            "maid",
            "maid, audit on",
            "maid, signed",
            "seed",
        ],
    );
    type Metric<'a> = (String, Box<dyn Fn(&Measured) -> String + 'a>);
    let flight = r.in_flight;
    let metrics: Vec<Metric> = vec![
        ("round trip p50".into(), Box::new(|m| fmt_dur(m.p(50.0)))),
        ("round trip p99".into(), Box::new(|m| fmt_dur(m.p(99.0)))),
        (
            "publish → PING p50".into(),
            Box::new(|m| fmt_dur(m.ping_p(50.0))),
        ),
        (
            format!("throughput, {flight} in flight, jobs/s"),
            Box::new(|m| fmt_count(m.throughput())),
        ),
        (
            "CPU per job".into(),
            Box::new(|m| fmt_dur(m.cpu_per_job(r.ticks))),
        ),
        (
            "master's CPU per job (this process)".into(),
            Box::new(|m| fmt_dur(m.master_cpu_per_job(r.ticks))),
        ),
        (
            "RSS idle (started)".into(),
            Box::new(|m| fmt_mb(m.rss_idle_kib)),
        ),
        (
            "of which anonymous (heap, stacks)".into(),
            Box::new(|m| fmt_mb(m.rss_idle_anon_kib)),
        ),
        (
            format!("RSS peak, {flight} in flight"),
            Box::new(|m| fmt_mb(m.rss_peak_kib)),
        ),
        (
            "RSS idle (after load)".into(),
            Box::new(|m| fmt_mb(m.rss_after_kib)),
        ),
        (
            "samples (round trips / jobs)".into(),
            Box::new(|m| format!("{} / {}", m.latencies.len(), m.flood_jobs)),
        ),
    ];
    for (label, f) in &metrics {
        let mut row = vec![label.clone()];
        for n in names {
            row.push(cell(n, f.as_ref()));
        }
        t1.row(row);
    }
    t1
}

/// The goals, each with its figure, bound and whether it was met.
fn goals_table(r: &Results) -> Table {
    let mut t2 = Table::new(
        "Goals (each from this run's numbers)",
        &["goal", "measured", "bound", "result"],
    );
    for goal in goals(r) {
        t2.row(goal.cells());
    }
    t2
}

/// A row of p50, p99 and max of some samples.
fn dist(label: String, v: &[Duration]) -> Vec<String> {
    let s = sorted(v.to_vec());
    vec![
        label,
        fmt_dur(percentile(&s, 50.0)),
        fmt_dur(percentile(&s, 99.0)),
        fmt_dur(s.last().copied().unwrap_or_default()),
    ]
}

/// A row with one figure, under p50, the other two columns empty.
fn single(label: String, value: String) -> Vec<String> {
    vec![label, value, String::new(), String::new()]
}

/// Everything else measured: the fan-outs, `cmd.run`, the in-process
/// calls, the spawns, start-up, and the fleets' CPU and memory.
fn other_table(r: &Results) -> Table {
    let mut t3 = Table::new("Other measurements", &["", "p50", "p99", "max"]);
    protocol_rows(&mut t3, r);
    fan_out_rows(&mut t3, r);
    cmd_rows(&mut t3, r);
    start_up_rows(&mut t3, r);
    fleet_rows(&mut t3, r);
    t3
}

/// One agent's figures against the protocol floor's: how much of maid's
/// ratio to raw the wire itself sets (the floor over raw), and how much
/// is maid's job handling and plugin call (maid over the floor).
fn protocol_rows(t3: &mut Table, r: &Results) {
    type Over = fn(&Results, &str, &str) -> Option<f64>;
    let measures: [(&str, &str, Over); 3] = [
        ("round trip", " p50", Results::p50_over),
        ("throughput", "", Results::throughput_over),
        ("CPU per job", "", Results::cpu_over),
    ];
    // (responder, over responder, as each is named in the label)
    let pairs = [
        ("protocol", "raw", "protocol floor", "raw"),
        ("maid", "protocol", "maid", "protocol floor"),
    ];
    for (what, p50, over) in measures {
        for (a, b, a_named, b_named) in pairs {
            t3.row(single(
                format!("{what}: {a_named}{p50} / {b_named}{p50}"),
                over(r, a, b).map(fmt_ratio).unwrap_or_else(|| "n/a".into()),
            ));
        }
    }
}

/// maid's fan-out, then each floor's and maid's over it.
fn fan_out_rows(t3: &mut Table, r: &Results) {
    t3.row(dist(
        format!(
            "fan-out test.ping to {} agents ({} rounds)",
            r.agents,
            r.fanout.len()
        ),
        &r.fanout,
    ));
    t3.row(dist(
        format!("fan-out to {} agents: publish → every PING", r.agents),
        &r.fanout_pings,
    ));
    // Each floor's fan-out, and maid's over it.
    let floors = [
        ("in one process, the floor", "raw", &r.raw_fanout),
        (
            "sending what the protocol asks",
            "protocol raw",
            &r.protocol_fanout,
        ),
    ];
    for (what, name, samples) in floors {
        t3.row(dist(
            format!(
                "fan-out to {} raw responders {what} ({} rounds)",
                r.agents,
                samples.len()
            ),
            samples,
        ));
        t3.row(single(
            format!("fan-out: maid p50 / {name} p50"),
            r.fanout_over(samples)
                .map(fmt_ratio)
                .unwrap_or_else(|| "n/a".into()),
        ));
    }
}

/// `cmd.run 'true'` over the round trip, in-process and against direct
/// spawns, and `cmd.run`'s own share.
fn cmd_rows(t3: &mut Table, r: &Results) {
    t3.row(dist(
        format!("cmd.run 'true' round trip ({})", r.cmd_run.len()),
        &r.cmd_run,
    ));
    t3.row(dist(
        format!(
            "test.ping through the plugin runtime, in-process ({})",
            r.calls.len()
        ),
        &r.calls,
    ));
    t3.row(dist(
        format!(
            "cmd.run 'true' through the plugin runtime, in-process ({})",
            r.cmd_calls.len()
        ),
        &r.cmd_calls,
    ));
    t3.row(dist(
        format!("spawn `true` directly ({})", r.spawn_true.len()),
        &r.spawn_true,
    ));
    t3.row(dist(
        format!("spawn `sh -c true` directly ({})", r.spawn_sh.len()),
        &r.spawn_sh,
    ));
    let us = |d: Option<f64>| d.map(fmt_signed_us).unwrap_or_else(|| "n/a".into());
    for (label, value) in [
        (
            "cmd.run 'true' round trip − spawning `true` (p50s)",
            r.cmd_over_spawn_us(),
        ),
        (
            "cmd.run 'true' − test.ping round trip − spawning `true` (p50s)",
            r.cmd_own_us(),
        ),
    ] {
        t3.row(single(label.into(), us(value)));
    }
}

/// Agent start-up with a cold cache (the plugins compiled ahead, then
/// compiling them) and a warm one, the RSS after each, and the fleet's.
fn start_up_rows(t3: &mut Table, r: &Results) {
    t3.row(single(
        format!(
            "`maid plugin compile`: {} plugins compiled ahead",
            r.plugins
        ),
        fmt_dur(r.compile_ahead),
    ));
    let starts = [
        (
            "cold cache, plugins compiled ahead",
            &r.cold,
            &r.cold_rss_kib,
        ),
        (
            "cold cache, compiling every plugin",
            &r.compiling,
            &r.compiling_rss_kib,
        ),
        ("warm cache", &r.warm, &r.warm_rss_kib),
    ];
    for (what, times, _) in starts {
        t3.row(dist(
            format!(
                "start-up to ready, {what}, {} plugins ({})",
                r.plugins,
                times.len()
            ),
            times,
        ));
    }
    for (what, _, rss) in starts {
        t3.row(single(
            format!("RSS once ready, {what}"),
            median_kib(rss)
                .map(|kib| fmt_mb(kib as u64))
                .unwrap_or_else(|| "n/a".into()),
        ));
    }
    t3.row(single(
        "RSS once ready: compiling every plugin / warm cache (p50s)".into(),
        r.rss_over_warm(&r.compiling_rss_kib)
            .map(fmt_ratio)
            .unwrap_or_else(|| "n/a".into()),
    ));
    t3.row(single(
        format!("bench-fleet: spawn to {} agents subscribed", r.agents),
        fmt_dur(r.fleet_ready),
    ));
}

/// Each fan-out's CPU per round with the pause after it, maid's fleet
/// first, and the fleet's RSS.
fn fleet_rows(t3: &mut Table, r: &Results) {
    let pause_rows = [
        (MAID, "fan-out", "bench-fleet process"),
        (RAW, "raw fan-out", "raw responders' process"),
        (PROTOCOL, "protocol raw fan-out", "responders' process"),
    ];
    for (i, fleet, process) in pause_rows {
        let [process_cpu, redis_cpu, _] = r.with_pause[i].means(r.ticks);
        for (what, cpu) in [(process, process_cpu), ("redis-server", redis_cpu)] {
            t3.row(single(
                format!("{fleet} CPU per round: {what}"),
                fmt_dur(cpu),
            ));
        }
    }
    t3.row(single(
        format!("bench-fleet RSS, {} agents", r.agents),
        fmt_mb(r.fleet_rss_kib),
    ));
}

/// Each fan-out's mean round against the least a round can take on this
/// machine, from the CPU every side used within the rounds.
fn floors_table(r: &Results) -> Table {
    let least = format!("the least a round can take on {} CPUs", r.cpus);
    let mut floors = Table::new(
        "Fan-out rounds against this machine (means; CPU from the publish to the last reply)",
        &[
            "",
            "round",
            "responders' CPU",
            "redis-server's CPU",
            "master's CPU",
            &least,
        ],
    );
    let fleets = [
        (RAW, "raw responders (the floor)", &r.raw_fanout),
        (MAID, "maid agents (bench-fleet)", &r.fanout),
        (
            PROTOCOL,
            "raw responders sending what the protocol asks",
            &r.protocol_fanout,
        ),
    ];
    for (i, name, rounds) in fleets {
        let mean = rounds.iter().sum::<Duration>()
            / u32::try_from(rounds.len().max(1)).unwrap_or(u32::MAX);
        let mut cells = vec![format!("{} × {}", r.agents, name), fmt_dur(mean)];
        cells.extend(r.in_round[i].means(r.ticks).map(fmt_dur));
        cells.push(fmt_dur(r.in_round[i].least(r.ticks, r.cpus)));
        floors.row(cells);
    }
    floors
}

/// The maid agent's own means from its `/metrics` (`--agent-metrics`).
fn agent_table(r: &Results) -> Table {
    let mut t4 = Table::new(
        "Inside the maid agent (its /metrics, means; --agent-metrics)",
        &["", "mean"],
    );
    let mean = |m: &MeanOf| m.mean().map(fmt_dur).unwrap_or_else(|| "n/a".into());
    t4.row(vec![
        "test.ping, sequential: message arrival → PING published".into(),
        mean(&r.arrival_to_ping),
    ]);
    t4.row(vec![
        "test.ping, sequential: the call in the plugin runtime".into(),
        mean(&r.ping_in_runtime),
    ]);
    t4.row(vec![
        "cmd.run 'true': the call in the plugin runtime".into(),
        mean(&r.cmd_in_runtime),
    ]);
    t4
}

/// The notes under the tables: the machine, the command and the run's
/// sizes, what CPU per job means, and why the seed was skipped.
fn notes(r: &Results, sizes: &Sizes) -> Vec<String> {
    let mut notes = vec![format!("machine: {}", machine(&redis_server_bin()))];
    notes.push(format!(
        "command: `{}` (jobs target {}; {} + {} seed round trips, {} + {} seed jobs at {} in flight in {} blocks, {} agents × {} rounds, fan-out runtime: {}, {} cmd.run, {} in-process calls, {} cold + {} cold compiling + {} warm start-ups)",
        command_line(),
        match r.tgt_type {
            TgtType::Glob => "`*` (glob)",
            TgtType::List => "the responder's id (list)",
        },
        sizes.round_trips,
        sizes.seed_round_trips,
        sizes.jobs,
        sizes.seed_jobs,
        sizes.in_flight,
        sizes.blocks,
        sizes.agents,
        sizes.fanout_rounds,
        if r.fanout_threads == 0 {
            "current-thread".to_string()
        } else {
            format!("{} current-thread runtimes", r.fanout_threads)
        },
        sizes.cmd_runs,
        sizes.calls,
        sizes.cold_starts,
        sizes.compiling_starts,
        sizes.warm_starts,
    ));
    notes.push(
        "CPU per job: user+system time of the responder process (and its reaped children) during the throughput run, divided by its jobs".into(),
    );
    if let Some(why) = &r.seed_skipped {
        notes.push(format!("seed skipped: {why}"));
    }
    notes
}

/// The command exactly as given, each argument quoted for a POSIX shell
/// where it needs it.
fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
