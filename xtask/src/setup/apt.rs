//! Setup's apt: one command line that never removes a package, simulated before it runs, and
//! a backport the machine already has followed rather than removed.
//!
//! Some machines come with a backported package (this workplace's have `qemu-utils`
//! 10.0 from `bookworm-backports`, with no backports entry in apt's sources). Debian's own
//! `qemu-system-*` 7.2 cannot be installed beside it (`qemu-utils` 10 Breaks
//! `qemu-system-common` << 8.0), so apt would remove it. Setup then installs the packages
//! that would remove it from the same backports suite, as the machine's package came, and
//! the rest from the default releases; it still removes nothing.

use super::{Missing, DEB_SOURCES};
use crate::util::is_root;
use anyhow::{bail, Context};
use xshell::{cmd, Shell};

/// Where setup writes the backports entry when apt knows none.
const BACKPORTS: &str = "/etc/apt/sources.list.d/labperf-backports.sources";

/// One `apt-get install`: its packages, and the release they are taken from (`-t`) when it
/// is not the default.
#[derive(Debug, PartialEq)]
pub struct Call {
    pub release: Option<String>,
    pub pkgs: Vec<String>,
}

/// apt-get's arguments to install `pkgs` (from `release` when given): no Recommends, and
/// never a removal: under `--no-remove` apt stops with an error rather than remove a
/// package. `simulate` adds `-s`: the same command line, run as a simulation.
pub fn apt_install_args(pkgs: &[&str], release: Option<&str>, simulate: bool) -> Vec<String> {
    let mut a: Vec<String> = [
        "install",
        "-y",
        "-q",
        "--no-install-recommends",
        "--no-remove",
    ]
    .map(String::from)
    .to_vec();
    if let Some(r) = release {
        a.extend(["-t".to_string(), r.to_string()]);
    }
    if simulate {
        a.push("-s".into());
    }
    a.extend(pkgs.iter().map(|p| p.to_string()));
    a
}

/// The packages an apt-get simulation says it would remove: its `Remv` lines, and, as it
/// prints under `--no-remove` before it stops, the list after "The following packages will
/// be REMOVED:".
pub fn removals(out: &str) -> Vec<String> {
    let mut r: Vec<String> = Vec::new();
    let mut in_list = false;
    for l in out.lines() {
        let names: Vec<&str> = if let Some(rest) = l.strip_prefix("Remv ") {
            in_list = false;
            rest.split_whitespace().take(1).collect()
        } else if l.starts_with("The following packages will be REMOVED") {
            in_list = true;
            continue;
        } else if in_list && l.starts_with(' ') {
            l.split_whitespace().collect()
        } else {
            in_list = false;
            continue;
        };
        for n in names {
            let n = n.trim_end_matches('*').to_string();
            if !r.contains(&n) {
                r.push(n);
            }
        }
    }
    r
}

/// Runs setup's apt-get command line for `pkgs` (from `release`) as a simulation (no root
/// needed): the packages apt would remove (none, or the install would fail), or apt's error.
pub fn simulate(sh: &Shell, pkgs: &[&str], release: Option<&str>) -> anyhow::Result<Vec<String>> {
    let args = apt_install_args(pkgs, release, true);
    let line = args.join(" ");
    let o = cmd!(sh, "apt-get {args...}")
        .env("LC_ALL", "C")
        .quiet()
        .ignore_status()
        .output()
        .context("cannot run apt-get")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let removed = removals(&text);
    if removed.is_empty() && !o.status.success() {
        bail!(
            "`apt-get {}` failed: {}",
            line,
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(removed)
}

/// The packages of `missing` whose install alone would remove a package, with what. One
/// simulation takes seconds, so halves are simulated and only a half that removes something
/// is split again (`removes`: whether `missing` as a whole does). A simulation that fails is
/// an error, never read as "removes nothing": a diagnosis from it would blame the wrong half.
fn culprits<'a>(
    sh: &Shell,
    missing: &'a [Missing],
    removes: bool,
) -> anyhow::Result<Vec<(&'a Missing, Vec<String>)>> {
    if !removes || missing.is_empty() {
        return Ok(Vec::new());
    }
    if let [m] = missing {
        let r = simulate(sh, &[m.package.as_str()], None)?;
        return Ok(if r.is_empty() {
            Vec::new()
        } else {
            vec![(m, r)]
        });
    }
    let (a, b) = missing.split_at(missing.len() / 2);
    let mut found = Vec::new();
    for half in [a, b] {
        let pkgs: Vec<&str> = half.iter().map(|m| m.package.as_str()).collect();
        let r = simulate(sh, &pkgs, None)?;
        found.extend(culprits(sh, half, !r.is_empty())?);
    }
    Ok(found)
}

/// What apt would remove for which package (`removed`: what the simulation of them all
/// would remove).
fn removal_report(culprits: &[(&Missing, Vec<String>)], removed: &[String]) -> String {
    if culprits.is_empty() {
        return format!(
            "installing them together would remove {}",
            removed.join(" ")
        );
    }
    culprits
        .iter()
        .map(|(m, r)| {
            format!(
                "installing {} (for {}) would remove {}",
                m.package,
                m.why(),
                r.join(" ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The installed version of `pkg`, if it is installed.
fn installed_version(sh: &Shell, pkg: &str) -> Option<String> {
    let format = "-f=${Version}";
    let v = cmd!(sh, "dpkg-query -W {format} {pkg}")
        .quiet()
        .ignore_stderr()
        .read()
        .ok()?;
    (!v.trim().is_empty()).then(|| v.trim().to_string())
}

/// A Debian backport's version: `1:10.0.2+ds-2+deb13u1~bpo12+1`.
pub fn is_backport(version: &str) -> bool {
    version.contains("~bpo")
}

/// This Debian's backports suite (`bookworm-backports`), from `/etc/os-release`.
fn backports_suite() -> anyhow::Result<String> {
    let os = std::fs::read_to_string("/etc/os-release").context("cannot read /etc/os-release")?;
    let codename = os
        .lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|c| c.trim_matches('"').to_string())
        .filter(|c| !c.is_empty())
        .context("/etc/os-release names no VERSION_CODENAME")?;
    Ok(format!("{codename}-backports"))
}

/// Whether apt has package lists of `suite` (`apt-cache policy` names each source it read).
fn apt_knows(sh: &Shell, suite: &str) -> bool {
    cmd!(sh, "apt-cache policy")
        .quiet()
        .ignore_stderr()
        .read()
        .is_ok_and(|p| p.contains(&format!(" {suite}/")))
}

/// A deb822 entry of `suite` (`bookworm-backports`), made from the first `Types: deb` stanza
/// of `sources` that carries the suite's release (`bookworm`): the same archive and key.
pub fn backports_entry(sources: &str, suite: &str) -> Option<String> {
    let release = suite.strip_suffix("-backports")?;
    sources.split("\n\n").find_map(|st| {
        let lines: Vec<&str> = st.lines().filter(|l| !l.starts_with('#')).collect();
        let deb = lines.iter().any(|l| l.trim() == "Types: deb");
        let has = lines.iter().any(|l| {
            l.strip_prefix("Suites:")
                .is_some_and(|s| s.split_whitespace().any(|x| x == release))
        });
        (deb && has).then(|| {
            lines
                .iter()
                .map(|l| {
                    if l.starts_with("Suites:") {
                        format!("Suites: {suite}")
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n"
        })
    })
}

/// How to install `missing` without removing a package: one call from the default
/// releases; or, where that would remove only backports the machine has, the packages that
/// would remove them taken from the same backports suite and the rest from the default
/// releases. `add_source`: write the suite's entry when apt knows none (root only);
/// otherwise a missing entry is an error. Every call is simulated and removes nothing.
pub fn plan(sh: &Shell, missing: &[Missing], add_source: bool) -> anyhow::Result<Vec<Call>> {
    let pkgs: Vec<&str> = missing.iter().map(|m| m.package.as_str()).collect();
    let removed = match simulate(sh, &pkgs, None) {
        Ok(r) => r,
        Err(e) => return follow_backports(sh, &pkgs, e),
    };
    if removed.is_empty() {
        return Ok(vec![Call {
            release: None,
            pkgs: pkgs.iter().map(|p| p.to_string()).collect(),
        }]);
    }
    let culprits = culprits(sh, missing, true).context(
        "apt would remove packages, and simulating the packages apart to find which one \
         does failed; nothing installed",
    )?;
    let refuse = |why: String| {
        anyhow::anyhow!(
            "nothing installed: apt would remove packages, which setup never does: {}{why}. \
             Install by hand if you accept that",
            removal_report(&culprits, &removed)
        )
    };
    let versions: Vec<(String, Option<String>)> = removed
        .iter()
        .map(|r| (r.clone(), installed_version(sh, r)))
        .collect();
    if culprits.is_empty()
        || !versions
            .iter()
            .all(|(_, v)| v.as_deref().is_some_and(is_backport))
    {
        return Err(refuse(String::new()));
    }
    let suite = backports_suite().map_err(|e| refuse(format!(" ({e})")))?;
    let had: Vec<String> = versions
        .iter()
        .map(|(p, v)| format!("{p} {}", v.as_deref().unwrap_or("?")))
        .collect();
    if !apt_knows(sh, &suite) {
        if !add_source || !is_root() {
            return Err(refuse(format!(
                " ({} came from {suite}, which apt's sources do not list: setup would add it)",
                had.join(", ")
            )));
        }
        let deb = std::fs::read_to_string(DEB_SOURCES)
            .map_err(|e| refuse(format!(" (cannot read {DEB_SOURCES}: {e})")))?;
        let entry = backports_entry(&deb, &suite).ok_or_else(|| {
            refuse(format!(
                " ({DEB_SOURCES} has no `Types: deb` entry of {suite}'s release)"
            ))
        })?;
        eprintln!(
            "setup: {} came from {suite}; apt's sources do not list it: writing {BACKPORTS} \
             (a backports suite is never chosen unless asked for, so nothing else changes)",
            had.join(", ")
        );
        std::fs::write(BACKPORTS, entry).with_context(|| format!("cannot write {BACKPORTS}"))?;
        cmd!(sh, "apt-get update -qq").run()?;
    }
    let from_bpo: Vec<&str> = culprits.iter().map(|(m, _)| m.package.as_str()).collect();
    let rest: Vec<&str> = pkgs
        .iter()
        .copied()
        .filter(|p| !from_bpo.contains(p))
        .collect();
    for (set, release) in [(&rest, None), (&from_bpo, Some(suite.as_str()))] {
        if set.is_empty() {
            continue;
        }
        let r = simulate(sh, set, release)?;
        if !r.is_empty() {
            return Err(refuse(format!(
                " (and installing {} from {} would still remove {})",
                set.join(" "),
                release.unwrap_or("the default releases"),
                r.join(" ")
            )));
        }
    }
    eprintln!(
        "setup: from the default releases {} would remove {}; {} from {suite} instead, as they came",
        from_bpo.join(" "),
        removed.join(" "),
        from_bpo.join(" ")
    );
    let mut calls = Vec::new();
    if !rest.is_empty() {
        calls.push(Call {
            release: None,
            pkgs: rest.iter().map(|p| p.to_string()).collect(),
        });
    }
    calls.push(Call {
        release: Some(suite),
        pkgs: from_bpo.iter().map(|p| p.to_string()).collect(),
    });
    Ok(calls)
}

/// The default releases cannot install `pkgs` (`why`: apt's own words). Where that is a
/// package of a backport the machine already has (`qemu-user-binfmt` 7.2 depends on
/// `qemu-user` of exactly its version, and this machine's `qemu-user` is 10.0 from
/// bookworm-backports), the same packages from that suite: taken only when its simulation
/// installs them and removes nothing. Otherwise apt's error, as it is.
fn follow_backports(sh: &Shell, pkgs: &[&str], why: anyhow::Error) -> anyhow::Result<Vec<Call>> {
    let Ok(suite) = backports_suite() else {
        return Err(why);
    };
    if !apt_knows(sh, &suite) {
        return Err(why);
    }
    match simulate(sh, pkgs, Some(&suite)) {
        Ok(r) if r.is_empty() => {
            eprintln!(
                "setup: the default releases cannot install {} ({why:#}); {suite} can, removing nothing: taking them from there",
                pkgs.join(" ")
            );
            Ok(vec![Call {
                release: Some(suite),
                pkgs: pkgs.iter().map(|p| p.to_string()).collect(),
            }])
        }
        _ => Err(why),
    }
}

/// How often setup looks at apt's locks while it waits.
const POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// Installs the `missing` packages with apt-get, after saying what and why; first simulates
/// the same command lines, and stops, installing nothing, when apt would remove a package.
pub fn install(sh: &Shell, missing: &[Missing]) -> anyhow::Result<()> {
    let pkgs: Vec<&str> = missing.iter().map(|m| m.package.as_str()).collect();
    eprintln!("setup: apt-get will install {}:", pkgs.join(" "));
    for m in missing {
        eprintln!("  {:<24} {}", m.package, m.why());
    }
    if !is_root() {
        bail!(
            "not root: install them with `sudo apt-get install --no-install-recommends --no-remove {}`",
            pkgs.join(" ")
        );
    }
    // Another apt-get, dpkg or unattended-upgrades at work leaves a half-installed system
    // that every simulation would misread: wait for it first, bounded and said.
    let say = |l: &str| eprintln!("{l}");
    super::lock::wait_for(&super::lock::APT_LOCKS, super::lock::WAIT, POLL, say)?;
    let _ = cmd!(sh, "apt-get update -qq").run();
    super::lock::wait_for(&super::lock::APT_LOCKS, super::lock::WAIT, POLL, say)?;
    for call in plan(sh, missing, true)? {
        let pkgs: Vec<&str> = call.pkgs.iter().map(String::as_str).collect();
        // apt's own wait too, for a dpkg that starts between setup's look and this call.
        let mut args = vec!["-o".to_string(), "DPkg::Lock::Timeout=600".to_string()];
        args.extend(apt_install_args(&pkgs, call.release.as_deref(), false));
        let line = args.join(" ");
        cmd!(sh, "apt-get {args...}")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .run()
            .with_context(|| format!("apt-get failed: run `apt-get {line}` by hand"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apt_installs_without_recommends_and_never_removes() {
        let a = apt_install_args(&["gcc", "libssl-dev"], None, false);
        assert_eq!(
            a,
            [
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                "--no-remove",
                "gcc",
                "libssl-dev"
            ]
        );
        let s = apt_install_args(&["gcc", "libssl-dev"], None, true);
        assert!(s.contains(&"-s".to_string()) && s.contains(&"--no-remove".to_string()));
        assert_eq!(
            s.iter().filter(|x| *x != "-s").collect::<Vec<_>>(),
            a.iter().collect::<Vec<_>>()
        );
        let b = apt_install_args(&["qemu-system-arm"], Some("bookworm-backports"), false);
        assert_eq!(
            b,
            [
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                "--no-remove",
                "-t",
                "bookworm-backports",
                "qemu-system-arm"
            ]
        );
    }

    #[test]
    fn the_parse_finds_what_apt_would_remove() {
        // apt-get -s without --no-remove: its Remv lines.
        let remv = "Reading package lists...\nInst sysvinit-core (3.06-4 Debian:12.15/oldstable [amd64])\nRemv at-spi2-core [2.46.0-5]\nRemv chromium [156.0.8078.114-1~deb12u1]\nRemv mawk [1.3.4.20200120-3.1] []\nConf sysvinit-core (3.06-4 Debian:12.15/oldstable [amd64])\n";
        assert_eq!(removals(remv), ["at-spi2-core", "chromium", "mawk"]);
        // Under --no-remove apt lists them, then stops (exit 100).
        let stopped = "Reading package lists...\nThe following packages were automatically installed and are no longer required:\n  appstream chromium-common\nUse 'apt autoremove' to remove them.\nThe following packages will be REMOVED:\n  at-spi2-core chromium* dbus-user-session\n  systemd-sysv\nThe following NEW packages will be installed:\n  initscripts insserv\n5 upgraded, 5 newly installed, 4 to remove and 130 not upgraded.\nE: Packages need to be removed but remove is disabled.\n";
        assert_eq!(
            removals(stopped),
            [
                "at-spi2-core",
                "chromium",
                "dbus-user-session",
                "systemd-sysv"
            ]
        );
        let clean = "The following NEW packages will be installed:\n  pkgconf\nInst pkgconf (1.8.1-1 Debian:12.15/oldstable [amd64])\nConf pkgconf (1.8.1-1 Debian:12.15/oldstable [amd64])\n0 upgraded, 1 newly installed, 0 to remove and 137 not upgraded.\n";
        assert!(removals(clean).is_empty());
    }

    #[test]
    fn a_backports_entry_is_the_release_s_archive_with_the_backports_suite() {
        // This workplace's debian.sources, as it is.
        let deb = "Types: deb\n# http://snapshot.debian.org/archive/debian/20250520T000000Z\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\n# http://snapshot.debian.org/archive/debian-security/20250520T000000Z\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n";
        assert_eq!(
            backports_entry(deb, "bookworm-backports").unwrap(),
            "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        );
        // Not the security archive, never a deb-src stanza, nothing for another release.
        let src_only = "Types: deb-src\nURIs: http://x\nSuites: bookworm\n";
        assert_eq!(backports_entry(src_only, "bookworm-backports"), None);
        assert_eq!(backports_entry(deb, "trixie-backports"), None);
        assert_eq!(backports_entry(deb, "bookworm"), None);
        assert!(is_backport("1:10.0.2+ds-2+deb13u1~bpo12+1"));
        assert!(!is_backport("1:7.2+dfsg-7+deb12u18+b3"));
    }

    /// Setup's own plan, run as simulations (no root needed, nothing written) for every
    /// package of the project on this machine: apt would install them all and remove
    /// nothing. On a machine with `qemu-utils` from bookworm-backports the qemu packages
    /// come from there too (setup wrote the entry when it installed them).
    #[test]
    fn setup_s_apt_lines_simulated_for_every_package_remove_nothing() {
        let mut pkgs = super::super::tests::packages_of(super::super::Need::Test);
        pkgs.push("qemu-user-binfmt");
        assert!(pkgs.len() > 40, "{pkgs:?}");
        let missing: Vec<Missing> = pkgs
            .iter()
            .map(|p| Missing {
                package: p.to_string(),
                reasons: vec![],
            })
            .collect();
        let sh = Shell::new().unwrap();
        let calls = plan(&sh, &missing, false).unwrap();
        let mut all: Vec<&str> = calls
            .iter()
            .flat_map(|c| c.pkgs.iter().map(String::as_str))
            .collect();
        all.sort();
        pkgs.sort();
        assert_eq!(all, pkgs);
        for c in &calls {
            let p: Vec<&str> = c.pkgs.iter().map(String::as_str).collect();
            let removed = simulate(&sh, &p, c.release.as_deref()).unwrap();
            assert!(removed.is_empty(), "{c:?}: apt would remove {removed:?}");
        }
    }
}
