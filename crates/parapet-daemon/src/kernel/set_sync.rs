//! Set changes mirrored into the loaded program: elements added, deleted
//! and flushed with the daemon's sets, expired ones reaped, and the wall
//! clock that time windows read.

use super::*;

impl Kernel {
    /// Mirrors added elements into the kernel when the live ruleset
    /// references set `name`. Each element's `expires` is its absolute
    /// expiry in Unix ms (`None` = permanent), turned into a remaining
    /// lifetime at `now`.
    pub fn set_add(&mut self, name: &str, els: &[Element], now: u64) -> Result<(), ErrorReply> {
        let Some((dp, id)) = self.kernel_set(name) else {
            return Ok(());
        };
        let mono = parapet_dataplane::monotonic_ns();
        let kels: Vec<_> = els
            .iter()
            .map(|e| {
                let remaining = e.expires.map(|exp| exp.saturating_sub(now).max(1));
                bridge::kernel_element(e, remaining, mono)
            })
            .collect();
        dp.set_add(id, &kels).map_err(|e| kernel_set_err(name, e))
    }

    /// Mirrors deleted elements.
    pub fn set_del(&mut self, name: &str, els: &[Element]) -> Result<(), ErrorReply> {
        let Some((dp, id)) = self.kernel_set(name) else {
            return Ok(());
        };
        let kels: Vec<_> = els
            .iter()
            .map(|e| bridge::kernel_element(e, None, 0))
            .collect();
        dp.set_del(id, &kels).map_err(|e| kernel_set_err(name, e))
    }

    /// Mirrors a flush.
    pub fn set_flush(&mut self, name: &str) -> Result<(), ErrorReply> {
        let Some((dp, id)) = self.kernel_set(name) else {
            return Ok(());
        };
        dp.set_flush(id).map_err(|e| kernel_set_err(name, e))
    }

    fn kernel_set(&mut self, name: &str) -> Option<(&mut Dataplane, u32)> {
        let dp = self.dp.as_mut()?;
        let id = dp.set_id(name)?;
        Some((dp, id))
    }

    /// Frees the kernel entries of expired elements (bounded per set); the
    /// reaper calls it with the daemon's own reaping.
    pub fn reap(&mut self, budget: usize) -> usize {
        match &mut self.dp {
            Some(dp) => dp.reap_sets(budget).unwrap_or_else(|e| {
                eprintln!("parapetd: dataplane: reaping expired set elements: {e}");
                0
            }),
            None => 0,
        }
    }

    /// Rewrites the boot → UTC offset time windows read (a stepped or
    /// slewed wall clock moves it); the reaper calls it every second.
    pub fn refresh_wall_clock(&mut self) {
        if let Some(dp) = &mut self.dp {
            let now = parapet_dataplane::stateful::WallClock::now();
            if let Err(e) = dp.set_wall_clock(now) {
                eprintln!("parapetd: dataplane: writing the wall clock: {e}");
            }
        }
    }
}

fn kernel_set_err(name: &str, e: parapet_dataplane::Error) -> ErrorReply {
    dp_err(
        &format!("set `{name}` changed in the daemon, but its kernel map update failed (the next apply reloads it)"),
        e,
    )
}
