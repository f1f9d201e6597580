//! Links libmodsecurity 3 as the system has it (Debian's `libmodsecurity-dev`).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if let Err(e) = pkg_config::Config::new()
        .atleast_version("3.0")
        .probe("modsecurity")
    {
        eprintln!(
            "libmodsecurity 3 was not found ({e}): the WAF needs it to build. On Debian: \
             apt-get install libmodsecurity-dev (scripts/setup installs it)"
        );
        std::process::exit(1);
    }
}
