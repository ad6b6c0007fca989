//! The epoch ticker: advances the engine's epoch, which is what stops a
//! guest past its deadline and makes a busy one yield, while any store
//! exists, and parks while none does.

use super::*;

/// Ticks the ticker keeps going after the last store is gone, so a steady
/// stream of jobs never has to wake it.
const IDLE_TICKS: u32 = 200;

/// While parked, how often the ticker checks that its engine still exists.
const PARKED_CHECK: Duration = Duration::from_secs(1);

/// Advances the engine's epoch, which is what stops a guest past its
/// deadline and makes a busy one yield, every [`EPOCH_TICK`] while a store
/// exists (and for [`IDLE_TICKS`] after); an idle agent's ticker sleeps
/// instead of waking 200 times a second. Ends when the engine is dropped.
pub(super) struct Ticker {
    state: Arc<TickState>,
    thread: std::thread::Thread,
}

#[derive(Default)]
struct TickState {
    /// Stores alive: each can run guest code.
    stores: AtomicUsize,
    /// The ticker is parked, or about to park.
    parked: AtomicBool,
}

/// Held by every store (in its [`HostState`]): the ticker ticks while one
/// exists.
pub(crate) struct Ticking(Arc<Ticker>);

impl Drop for Ticking {
    fn drop(&mut self) {
        self.0.state.stores.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Ticker {
    pub(super) fn start(engine: &Engine) -> Arc<Ticker> {
        let weak = engine.weak();
        let state = Arc::new(TickState::default());
        let shared = state.clone();
        let handle = std::thread::Builder::new()
            .name("maid-epoch".into())
            .spawn(move || {
                let state = shared;
                let mut idle = 0;
                loop {
                    let Some(engine) = weak.upgrade() else { return };
                    engine.increment_epoch();
                    drop(engine);
                    if state.stores.load(Ordering::SeqCst) > 0 {
                        idle = 0;
                    } else {
                        idle += 1;
                    }
                    if idle < IDLE_TICKS {
                        std::thread::sleep(EPOCH_TICK);
                        continue;
                    }
                    // Say "parked" before looking at the count: a store made
                    // meanwhile either is seen here or sees the flag and
                    // unparks this thread.
                    state.parked.store(true, Ordering::SeqCst);
                    while state.stores.load(Ordering::SeqCst) == 0 {
                        if weak.upgrade().is_none() {
                            return;
                        }
                        std::thread::park_timeout(PARKED_CHECK);
                    }
                    state.parked.store(false, Ordering::SeqCst);
                    idle = 0;
                }
            })
            .expect("spawn epoch thread");
        Arc::new(Ticker {
            state,
            thread: handle.thread().clone(),
        })
    }

    /// A store is being made: tick (waking the ticker if it sleeps).
    pub(super) fn ticking(self: &Arc<Self>) -> Ticking {
        self.state.stores.fetch_add(1, Ordering::SeqCst);
        if self.state.parked.load(Ordering::SeqCst) {
            self.thread.unpark();
        }
        Ticking(self.clone())
    }

    /// Whether the ticker sleeps (no store for a while).
    pub(super) fn parked(&self) -> bool {
        self.state.parked.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> Engine {
        let mut config = EngineConfig::new();
        config.epoch_interruption(true);
        Engine::new(&config).unwrap()
    }

    /// Waits up to `secs` for `done`.
    fn eventually(secs: u64, done: impl Fn() -> bool) -> bool {
        let until = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < until {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        done()
    }

    #[test]
    fn it_parks_when_no_store_exists_and_wakes_for_one() {
        let engine = engine();
        let ticker = Ticker::start(&engine);
        // Nothing ticks for long without a store: after its idle ticks it
        // parks (200 ticks of 5 ms).
        assert!(eventually(10, || ticker.parked()), "never parked");
        let ticking = ticker.ticking();
        assert!(
            eventually(10, || !ticker.parked()),
            "a store did not wake it"
        );
        assert_eq!(ticker.state.stores.load(Ordering::SeqCst), 1);
        drop(ticking);
        assert_eq!(ticker.state.stores.load(Ordering::SeqCst), 0);
        assert!(eventually(10, || ticker.parked()), "never parked again");
    }

    #[test]
    fn it_ends_with_its_engine() {
        let engine = engine();
        let ticker = Ticker::start(&engine);
        let thread = ticker.thread.clone();
        drop(engine);
        // Its thread sees the engine gone within a parked check; unparking
        // makes that at once.
        thread.unpark();
        assert!(eventually(10, || Arc::strong_count(&ticker.state) == 1));
    }
}
