//! `cargo run -p parapet-sets --example explain -- FILE [FILE…]`: loads ipset
//! save or nft set files (recognised by content) and prints `explain` for
//! every set — what `parapet set explain NAME` shows.

use parapet_sets::SetStore;

fn main() {
    let mut store = SetStore::new();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let demo = "set ban { type ipv4_addr; flags interval,timeout; timeout 1h; size 1000000; elements = { 10.0.0.0/8, 192.0.2.1 } }\n\
                set svc { type ipv4_addr . inet_service; flags interval; elements = { 192.0.2.0/24 . 1000-2000 } }\n\
                set ports { type inet_service; }\n\
                set small { type inet_service; size 8; policy memory; flags timeout; }\n\
                set peers { type ipv6_addr; }\n";
    let inputs: Vec<(String, String)> = if args.is_empty() {
        vec![("<demo>".into(), demo.into())]
    } else {
        args.iter()
            .map(|f| {
                (
                    f.clone(),
                    std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{f}: {e}")),
                )
            })
            .collect()
    };
    for (name, text) in inputs {
        let ipset = text
            .lines()
            .map(str::trim_start)
            .any(|l| l.starts_with("create ") || l.starts_with("add "));
        let r = if ipset {
            store.load_ipset(&text)
        } else {
            store.load_nft(&text)
        };
        if let Err(e) = r {
            eprintln!("{name}:{}:{}: {}", e.line, e.column, e.message);
            std::process::exit(1);
        }
    }
    for n in store.names() {
        println!("{}", store.explain(n).unwrap());
    }
}
