//! The end-to-end tests' bed: two network namespaces joined by a veth pair
//! (the shared [`parapet_testbed::Pair`]), addresses 10.250.0.0/30 inside
//! them; removed on drop, also on failure.

use std::net::Ipv4Addr;

use parapet_testbed::{Pair, Veth};

/// Address of the receiving end (`ppv-rx` in namespace `rx`).
pub const RX_ADDR: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 1);
/// Address of the sending end (`ppv-tx` in namespace `tx`).
pub const TX_ADDR: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 2);

/// The two namespaces by name; deleting them (on drop) also removes the
/// veth ends inside them.
pub struct Netns {
    /// The receiving namespace, where the program under test is attached.
    pub rx: String,
    /// The sending namespace.
    pub tx: String,
    _pair: Pair,
}

impl Netns {
    pub fn create(tag: &str) -> Result<Self, String> {
        let pair = Pair::create(
            tag,
            &Veth {
                a_dev: "ppv-rx",
                b_dev: "ppv-tx",
                a_addr: RX_ADDR,
                b_addr: TX_ADDR,
                ..Veth::default()
            },
        )?;
        Ok(Netns {
            rx: pair.a.name().to_string(),
            tx: pair.b.name().to_string(),
            _pair: pair,
        })
    }

    /// Run `f` on a thread that has entered namespace `name`. Sockets and
    /// attachments made there stay bound to that namespace.
    pub fn run_in<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> T {
        parapet_testbed::in_netns(name, f)
    }
}
