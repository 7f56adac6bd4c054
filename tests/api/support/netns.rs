//! A second host for a test: a network namespace joined to this one by a veth pair, with
//! addresses the test creates (a /30 in 10.213.0.0/16, picked per process), removed on drop.
//! Needs root and iproute2 (`ip netns`), as the suite has.

use std::process::{Command, Output};

/// A network namespace with one veth link to the host.
pub struct NetNs {
    /// The namespace's name (`ip netns exec NAME ...`).
    name: String,
    /// The host's end of the veth pair.
    host_link: String,
    /// The host's address on the link (what the namespace reaches the host by).
    pub host_ip: String,
    /// The namespace's address on the link.
    pub ns_ip: String,
}

/// Runs `ip ARGS`, panicking with its stderr on failure.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl NetNs {
    /// Creates the namespace and the link, both ends up.
    pub fn new(tag: &str) -> Self {
        let pid = std::process::id();
        let name = format!("leafid-{tag}-{pid}");
        // Interface names are at most 15 bytes.
        let host_link = format!("lf{}h{}", tag.chars().next().unwrap_or('x'), pid % 100_000);
        let ns_link = format!("lf{}n{}", tag.chars().next().unwrap_or('x'), pid % 100_000);
        let third = pid % 250;
        let (host_ip, ns_ip) = (format!("10.213.{third}.1"), format!("10.213.{third}.2"));
        // Leftovers of an earlier run with the same pid would make `add` fail.
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let _ = Command::new("ip")
            .args(["link", "del", &host_link])
            .output();
        ip(&["netns", "add", &name]);
        let ns = Self {
            name,
            host_link,
            host_ip,
            ns_ip,
        };
        ip(&[
            "link",
            "add",
            &ns.host_link,
            "type",
            "veth",
            "peer",
            "name",
            &ns_link,
        ]);
        ip(&["link", "set", &ns_link, "netns", &ns.name]);
        ip(&[
            "addr",
            "add",
            &format!("{}/30", ns.host_ip),
            "dev",
            &ns.host_link,
        ]);
        ip(&["link", "set", &ns.host_link, "up"]);
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", ns.name.as_str(), "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        inside(&["addr", "add", &format!("{}/30", ns.ns_ip), "dev", &ns_link]);
        inside(&["link", "set", &ns_link, "up"]);
        inside(&["link", "set", "lo", "up"]);
        ns
    }

    /// Runs `program ARGS` inside the namespace.
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.name, program])
            .args(args)
            .output()
            .expect("run ip netns exec")
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // Deleting the namespace deletes its end of the pair, and with it the host's end.
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_link])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}
