//! The time unit of a rate (`-m limit`, `-m hashlimit`, nft `limit`).

use serde::{Deserialize, Serialize};

/// Time units of a rate.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TimeUnit {
    /// Per second.
    Second,
    /// Per minute.
    Minute,
    /// Per hour.
    Hour,
    /// Per day.
    Day,
}

impl TimeUnit {
    /// Length of the unit in seconds.
    pub fn seconds(self) -> u32 {
        match self {
            TimeUnit::Second => 1,
            TimeUnit::Minute => 60,
            TimeUnit::Hour => 3600,
            TimeUnit::Day => 86400,
        }
    }

    /// iptables' spelling (`second`, `minute`, …).
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Second => "second",
            TimeUnit::Minute => "minute",
            TimeUnit::Hour => "hour",
            TimeUnit::Day => "day",
        }
    }
}
