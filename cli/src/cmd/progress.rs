//! `salt --progress`: the bar Salt draws on stderr with the `progressbar`
//! package (2.5) and the widgets of its `progress` outputter —
//! `Percentage, " ", Bar, " ", Timer, " Returns: [", Counter, "/N]"` —
//! redrawn with `\r` as returns arrive, and never ended with a newline
//! (Salt calls a `stop()` that package does not have).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often the bar redraws at most between steps of
/// `maxval / max(100, width)` (`ProgressBar.poll`).
const POLL: Duration = Duration::from_secs(1);

/// The bar, as `progressbar.ProgressBar` keeps it.
pub struct ProgressBar {
    /// The minions the job was published to, as the counter's `/N` shows.
    minion_count: usize,
    maxval: usize,
    currval: usize,
    width: usize,
    started: Instant,
    last_drawn: Instant,
    next_update: f64,
    update_interval: f64,
}

impl ProgressBar {
    /// Start the bar for `minion_count` minions and draw it at 0 on stderr.
    pub fn start(minion_count: usize) -> ProgressBar {
        let mut bar = ProgressBar::new(minion_count, term_width(), Instant::now());
        let line = bar.step(0, bar.started);
        draw(line);
        bar
    }

    fn new(minion_count: usize, width: usize, now: Instant) -> ProgressBar {
        ProgressBar {
            minion_count,
            maxval: minion_count,
            currval: 0,
            width,
            started: now,
            last_drawn: now,
            next_update: 0.0,
            update_interval: minion_count as f64 / width.max(100) as f64,
        }
    }

    /// `return_count` returns are in: redraw when due.
    pub fn update(&mut self, return_count: usize) {
        let line = self.step(return_count, Instant::now());
        draw(line);
    }

    /// The outputter's `update`: the bar grows past the count it started
    /// with (returns from behind a syndic); then `ProgressBar.update`,
    /// which gives the line to draw when one is due.
    fn step(&mut self, value: usize, now: Instant) -> Option<String> {
        self.maxval = self.maxval.max(value);
        self.currval = value;
        let due =
            self.currval as f64 >= self.next_update || now.duration_since(self.last_drawn) > POLL;
        if !due {
            return None;
        }
        self.next_update = self.currval as f64 + self.update_interval;
        self.last_drawn = now;
        Some(self.line(now.duration_since(self.started)))
    }

    /// The widgets, the bar filling what the others leave, the line padded
    /// to the terminal's width.
    fn line(&self, elapsed: Duration) -> String {
        let percentage = if self.maxval == 0 || self.currval >= self.maxval {
            100.0
        } else {
            self.currval as f64 * 100.0 / self.maxval as f64
        };
        let head = format!("{:3}%", percentage as u64);
        let tail = format!(
            "Elapsed Time: {} Returns: [{}/{}]",
            timedelta(elapsed.as_secs()),
            self.currval,
            self.minion_count
        );
        // The two " " widgets around the bar.
        let fixed = head.chars().count() + tail.chars().count() + 2;
        let inner = self.width as i64 - fixed as i64 - 2;
        let marked = if self.maxval > 0 && inner > 0 {
            (self.currval as f64 / self.maxval as f64 * inner as f64) as usize
        } else {
            0
        };
        let inner = inner.max(0) as usize;
        let bar = format!("|{}{}|", "#".repeat(marked), " ".repeat(inner - marked));
        let line = format!("{head} {bar} {tail}");
        format!("{line:<width$}", width = self.width)
    }
}

/// Python's `str(datetime.timedelta(seconds=s))`.
fn timedelta(secs: u64) -> String {
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let clock = format!("{}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60);
    match days {
        0 => clock,
        1 => format!("1 day, {clock}"),
        n => format!("{n} days, {clock}"),
    }
}

/// The width the bar fills: the terminal's when stderr is one, else
/// `$COLUMNS - 1`, else 79 (`_handle_resize`, `_env_size`).
fn term_width() -> usize {
    let stderr = std::io::stderr();
    if stderr.is_terminal()
        && let Some((terminal_size::Width(w), _)) = terminal_size::terminal_size_of(&stderr)
    {
        return w.into();
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .unwrap_or(80)
        .saturating_sub(1)
}

fn draw(line: Option<String>) {
    if let Some(line) = line {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{line}\r");
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What progressbar 2.5 drew for Salt's widgets, three minions, 79
    /// columns.
    #[test]
    fn draws_as_progressbar_does() {
        let t0 = Instant::now();
        let mut bar = ProgressBar::new(3, 79, t0);
        let lines: Vec<String> = (0..=3).filter_map(|n| bar.step(n, t0)).collect();
        let bar_of = |marks: usize| format!("|{}{}|", "#".repeat(marks), " ".repeat(35 - marks));
        assert_eq!(
            lines,
            [
                format!("  0% {} Elapsed Time: 0:00:00 Returns: [0/3]", bar_of(0)),
                format!(" 33% {} Elapsed Time: 0:00:00 Returns: [1/3]", bar_of(11)),
                format!(" 66% {} Elapsed Time: 0:00:00 Returns: [2/3]", bar_of(23)),
                format!("100% {} Elapsed Time: 0:00:00 Returns: [3/3]", bar_of(35)),
            ]
        );
        assert!(lines.iter().all(|l| l.chars().count() == 79));
    }

    #[test]
    fn grows_past_the_count_and_skips_steps_too_small_to_show() {
        let t0 = Instant::now();
        // 300 minions on 79 columns: a step every 3 returns.
        let mut bar = ProgressBar::new(300, 79, t0);
        assert!(bar.step(0, t0).is_some());
        assert!(bar.step(1, t0).is_none());
        assert!(bar.step(3, t0).is_some());
        // ... unless a second has passed.
        assert!(bar.step(4, t0 + Duration::from_millis(1100)).is_some());
        let mut small = ProgressBar::new(1, 40, t0);
        let line = small.step(2, t0).unwrap();
        assert!(line.starts_with("100% |"), "{line}");
        assert!(line.ends_with("Returns: [2/1]"), "{line}");
        assert_eq!(timedelta(3_725), "1:02:05");
        assert_eq!(timedelta(90_000), "1 day, 1:00:00");
    }
}
