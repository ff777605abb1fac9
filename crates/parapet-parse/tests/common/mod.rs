pub mod udp_lo;
