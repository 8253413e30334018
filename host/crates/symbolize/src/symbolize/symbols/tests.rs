//! The tests of `symbols.rs`: ELF symbols, labels and PLT stubs, load bias, the search path, build-id checks and DWARF lines.

use super::*;
use crate::symbolize::elf::*;
use crate::symbolize::lines::qualified;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

#[test]
fn labels_in_code_are_named_unless_inside_a_function() {
    // Hand-written assembly as ld.so's and musl's `_start` are: a label of no type and
    // no size (named, as perf names it), a function with a size and a label inside it
    // (the function's), a hidden label (not named).
    let d = std::env::temp_dir().join(format!("labperf-labels-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("l.s"),
        ".text\n nop\n.globl entry\nentry:\n nop\n nop\n.globl f\n.type f,@function\nf:\n nop\ninner:\n nop\n ret\n.size f, .-f\n.globl hid\n.hidden hid\nhid:\n nop\n",
    )
    .unwrap();
    let st = std::process::Command::new("gcc")
        .args(["-c", "-o"])
        .arg(d.join("l.o"))
        .arg(d.join("l.s"))
        .status()
        .expect("gcc (cargo xtask setup installs it)");
    assert!(st.success());
    let data = std::fs::read(d.join("l.o")).unwrap();
    let _ = std::fs::remove_dir_all(&d);
    let e = Elf::parse(&data).unwrap();
    // A nop at 0, entry at 1, f at 3 (inner at 4, its end at 6), hid at 6.
    assert_eq!(e.symbol(1), Some("entry"), "{:?}", e.syms);
    assert_eq!(e.symbol(2), Some("entry"), "{:?}", e.syms);
    assert_eq!(e.symbol(4), Some("f"), "{:?}", e.syms);
    assert_eq!(e.symbol(5), Some("f"), "{:?}", e.syms);
    assert!(
        e.syms.iter().all(|s| &*s.2 != "inner" && &*s.2 != "hid"),
        "{:?}",
        e.syms
    );
    assert_eq!(e.function(4), Some((3, 6, "f")));
    assert_eq!(e.function(1), Some((1, 3, "entry")));
}

#[test]
fn a_symbol_without_a_size_ends_with_its_section() {
    // A dynamic C program: `_init` (no size) in .init, then the PLT's stubs, which
    // belong to no function (perf shows them apart); they were all named `_init`.
    let d = std::env::temp_dir().join(format!("labperf-plt-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("p.c"),
        "#include <stdio.h>\nint main(void) { puts(\"x\"); return 0; }\n",
    )
    .unwrap();
    let st = std::process::Command::new("gcc")
        .args(["-O1", "-fno-pie", "-no-pie", "-o"])
        .arg(d.join("p"))
        .arg(d.join("p.c"))
        .status()
        .expect("gcc (cargo xtask setup installs it)");
    assert!(st.success());
    let data = std::fs::read(d.join("p")).unwrap();
    let _ = std::fs::remove_dir_all(&d);
    let f = object::File::parse(&*data).unwrap();
    let sec = |n: &str| f.section_by_name(n).unwrap_or_else(|| panic!("no {n}"));
    let (init, plt) = (sec(".init"), sec(".plt"));
    let e = Elf::parse(&data).unwrap();
    assert_eq!(e.symbol(init.address()), Some("_init"));
    // The PLT's first stub (it calls the dynamic linker) is no function's; the next
    // ones are named as perf names them.
    assert_eq!(e.symbol(plt.address()), None);
    assert_eq!(e.symbol(plt.address() + plt.size() - 1), Some("puts@plt"));
}

/// Each stub objdump labels `<sym@plt>` in `file` (binutils finds the stubs by
/// decoding them) has that name here, from its first byte to its last; a stub of an
/// ifunc objdump labels `<*ABS*+0xADDR@plt>` is named after the function at ADDR.
/// Returns the names.
fn assert_stubs_as_objdump(file: &Path, objdump: &str) -> Vec<String> {
    let o = std::process::Command::new(objdump)
        .arg("-d")
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{objdump} (binutils): {e}"));
    // "0000000000001030 <puts@plt>:"
    let labels: Vec<(u64, String)> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let (a, rest) = l.split_once(" <")?;
            let name = rest.strip_suffix(">:")?;
            name.ends_with("@plt")
                .then(|| Some((u64::from_str_radix(a, 16).ok()?, name.to_string())))?
        })
        .collect();
    let e = Elf::parse(&std::fs::read(file).unwrap()).unwrap();
    let f = file.display();
    let mut names = Vec::new();
    for (a, label) in &labels {
        let want = match label.strip_prefix("*ABS*+0x") {
            Some(ifunc) => {
                let resolver = u64::from_str_radix(ifunc.trim_end_matches("@plt"), 16).unwrap();
                let (start, _, name) = e.function(resolver).unwrap();
                assert_eq!(start, resolver, "{f}: {label}");
                format!("{name}@plt")
            }
            None => label.clone(),
        };
        let (start, end, n) = e.function(*a).unwrap_or_else(|| panic!("{f}: {a:#x}"));
        assert_eq!((start, n), (*a, want.as_str()), "{f}: {a:#x}");
        assert_eq!(e.symbol(end - 1), Some(want.as_str()), "{f}: {a:#x}");
        if let Some((next, _)) = labels.iter().find(|(b, _)| b > a) {
            assert!(end <= *next, "{f}: {want} at {a:#x} reaches {end:#x}");
        }
        names.push(want);
    }
    names
}

/// A C program calling libc through its PLT, built by `cc` with `flags`: its stubs
/// are named as objdump labels them.
fn plt_stubs_are_named_as_objdump_labels_them(cc: &str, objdump: &str, flags: &[&str]) {
    let d = std::env::temp_dir().join(format!(
        "labperf-plt-{cc}-{}-{}",
        flags.join(""),
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("p.c"),
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n\
         int main(int c, char **v) { puts(v[0]); printf(\"%ld %zu %d\\n\", labs(-c), \
         strlen(v[0]), getpid()); return 0; }\n",
    )
    .unwrap();
    let st = std::process::Command::new(cc)
        .args(["-O1", "-fno-builtin"])
        .args(flags)
        .arg("-o")
        .arg(d.join("p"))
        .arg(d.join("p.c"))
        .status()
        .unwrap_or_else(|e| panic!("{cc} (cargo xtask setup installs it): {e}"));
    assert!(st.success());
    let names = assert_stubs_as_objdump(&d.join("p"), objdump);
    let _ = std::fs::remove_dir_all(&d);
    for want in [
        "puts@plt",
        "printf@plt",
        "labs@plt",
        "strlen@plt",
        "getpid@plt",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{cc} {flags:?}: objdump's stubs {names:?}"
        );
    }
}

#[test]
fn plt_stubs_are_named_sym_at_plt_on_x86_64() {
    if cfg!(not(target_arch = "x86_64")) {
        return;
    }
    for flags in [
        &[][..],
        &["-fno-pie", "-no-pie"],
        &["-Wl,-z,now"],
        // Indirect-branch tracking: the calls go through `.plt.sec`.
        &["-fcf-protection", "-Wl,-z,ibtplt"],
    ] {
        plt_stubs_are_named_as_objdump_labels_them("gcc", "objdump", flags);
    }
    // libc's own stubs are of its ifuncs (`IRELATIVE` slots).
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let names = assert_stubs_as_objdump(libc, "objdump");
    assert!(names.len() > 10, "{names:?}");
}

#[test]
fn plt_stubs_are_named_sym_at_plt_on_aarch64() {
    for flags in [
        &[][..],
        &["-fno-pie", "-no-pie"],
        // 24-byte stubs: pointer authentication, and BTI in an executable.
        &["-Wl,-z,pac-plt"],
        &[
            "-mbranch-protection=standard",
            "-Wl,-z,force-bti",
            "-fno-pie",
            "-no-pie",
        ],
        &[
            "-mbranch-protection=standard",
            "-Wl,-z,force-bti,-z,pac-plt",
        ],
    ] {
        plt_stubs_are_named_as_objdump_labels_them(
            "aarch64-linux-gnu-gcc",
            "aarch64-linux-gnu-objdump",
            flags,
        );
    }
}

#[test]
fn a_plt_stub_s_symbol_is_demangled() {
    assert_eq!(demangle("_ZdlPv@plt"), "operator delete@plt");
    assert_eq!(
        demangle_as("_ZdlPv@plt", true),
        "operator delete(void*)@plt"
    );
    assert_eq!(demangle("puts@plt"), "puts@plt");
}

#[test]
fn the_load_bias_comes_from_the_segment_a_mapping_maps() {
    // (offset, vaddr, file size, p_flags: X 1, W 2, R 4) of each PT_LOAD.
    let elf = |segs: &[(u64, u64, u64, u32)]| Elf {
        segments: segs
            .iter()
            .map(|&(offset, vaddr, filesz, flags)| Segment {
                offset,
                vaddr,
                filesz,
                flags,
            })
            .collect(),
        ..Default::default()
    };
    let at = |addr, len, pgoff, prot| Placement {
        addr,
        len,
        pgoff,
        prot,
    };
    // gcc -O2 tiny PIE (-z separate-code): a 0x50d-byte executable segment in one page;
    // the middle of its mapping lies past it (where the unwinder used to look).
    let pie = elf(&[
        (0, 0, 0x6b0, 4),
        (0x1000, 0x1000, 0x50d, 5),
        (0x2000, 0x2000, 0x1f8, 4),
        (0x2dd0, 0x3dd0, 0x258, 6),
    ]);
    let base = 0x5555_5555_4000;
    assert_eq!(pie.bias(&at(base + 0x1000, 0x1000, 0x1000, 5)), Some(base));
    assert_eq!(pie.bias(&at(base, 0x1000, 0, 1)), Some(base));
    assert_eq!(pie.bias(&at(base + 0x2000, 0x1000, 0x2000, 1)), Some(base));
    // The writable segment starts in the read-only one's last page of the file.
    assert_eq!(pie.bias(&at(base + 0x3000, 0x2000, 0x2000, 3)), Some(base));
    // A mapping that starts inside its segment (the writable segment's second page,
    // split from the first by RELRO, as /proc lists it).
    assert_eq!(pie.bias(&at(base + 0x4000, 0x1000, 0x3000, 3)), Some(base));
    // Old ld without separate code, non-PIE: text and data share a page of the file.
    let old = elf(&[(0, 0x40_0000, 0x8f0, 5), (0xdb8, 0x60_0db8, 0x230, 6)]);
    assert_eq!(old.bias(&at(0x40_0000, 0x1000, 0, 5)), Some(0));
    assert_eq!(old.bias(&at(0x60_0000, 0x1000, 0, 3)), Some(0));
    // Protection unknown (an old PERF_RECORD_MMAP): code.
    assert_eq!(old.bias(&at(0x40_0000, 0x1000, 0, 0)), Some(0));
    // A prelinked library loaded below its link address: the bias wraps.
    let pre = elf(&[(0, 0x3a00_0000, 0x5000, 5)]);
    let b = pre.bias(&at(0x1000_0000, 0x5000, 0, 5)).unwrap();
    assert_eq!(0x1000_0123u64.wrapping_sub(b), 0x3a00_0123);
    // A large text mapped in two pieces.
    let big = elf(&[(0x1000, 0x1000, 0x3000, 5)]);
    assert_eq!(big.bias(&at(base + 0x2000, 0x1000, 0x2000, 5)), Some(base));
    // The vDSO: one segment from its first byte.
    let vdso = elf(&[(0, 0, 0x1500, 5)]);
    let v = 0x7fff_f7fc_1000;
    assert_eq!(vdso.bias(&at(v, 0x2000, 0, 5)), Some(v));
    // A static non-PIE binary: no bias.
    let st = elf(&[(0, 0x40_0000, 0x500, 4), (0x1000, 0x40_1000, 0x7_8000, 5)]);
    assert_eq!(st.bias(&at(0x40_1000, 0x7_8000, 0x1000, 5)), Some(0));
    // An offset no segment maps: another file.
    assert_eq!(pie.bias(&at(base + 0x9000, 0x1000, 0x9000, 5)), None);
}

#[test]
fn a_cxx_name_without_its_scope_is_told_apart_by_the_function_it_is_inlined_into() {
    let names = |v: &[(&str, bool)]| -> Vec<String> {
        qualified(v.iter().map(|(n, b)| (n.to_string(), *b)).collect())
            .iter()
            .map(|n| n.to_string())
            .collect()
    };
    // Two lambdas' operator(), each inlined into its own apply<>: two names.
    assert_eq!(
        names(&[("operator()", true), ("apply<a::<lambda> >", false)]),
        ["operator() [in apply<a::<lambda> >]"]
    );
    assert_eq!(
        names(&[("operator()", true), ("apply<b::<lambda> >", false)]),
        ["operator() [in apply<b::<lambda> >]"]
    );
    // A chain: each bare name by its own outer one; qualified names and C stay.
    assert_eq!(
        names(&[
            ("vector", true),
            ("std::map<int, int>::operator[]", false),
            ("mix", false),
            ("main", false)
        ]),
        [
            "vector [in std::map<int, int>::operator[]]",
            "std::map<int, int>::operator[]",
            "mix"
        ]
    );
    assert!(names(&[]).is_empty());
}

#[test]
fn demangles_rust_and_cpp() {
    assert_eq!(
        demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
        "core::fmt::write"
    );
    // As perf shows them: no parameter list, no return type; the whole with `full`.
    assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar");
    assert_eq!(demangle_as("_ZN3foo3barEv", true), "foo::bar()");
    assert_eq!(
        demangle("_Z11sum_squaresIlET_RKSt6vectorIS0_SaIS0_EERd"),
        "sum_squares<long>"
    );
    assert_eq!(
        demangle_as("_Z11sum_squaresIlET_RKSt6vectorIS0_SaIS0_EERd", true),
        "long sum_squares<long>(std::vector<long, std::allocator<long> > const&, double&)"
    );
    assert_eq!(demangle("int_divider_stalls"), "int_divider_stalls");
}

#[test]
fn resolves_own_binary_through_its_mapping() {
    // Map this test binary as the kernel would and resolve a real function's address.
    let exe = std::env::current_exe().unwrap();
    let data = std::fs::read(&exe).unwrap();
    let elf = Elf::parse(&data).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let sym = f
        .symbols()
        .find(|s| {
            s.name()
                .is_ok_and(|n| n.contains("resolves_own_binary_through_its_mapping"))
                && s.kind() == SymbolKind::Text
        })
        .unwrap();
    let seg = f
        .segments()
        .find(|s| s.address() <= sym.address() && sym.address() < s.address() + s.size())
        .unwrap();
    let (seg_off, _) = seg.file_range();
    let bias = 0x5555_5555_0000u64;
    let mut s = Symbolizer::new(Search::new(vec![]));
    s.observe(&Record::Mmap2(Mmap2 {
        pid: 7,
        tid: 7,
        addr: (seg.address() + bias) & !0xfff,
        len: seg.size() + 0x1000,
        pgoff: seg_off & !0xfff,
        path: exe.to_string_lossy().into(),
        build_id: elf.build_id.clone(),
        ..Default::default()
    }));
    let loc = s.resolve(7, sym.address() + bias + 1);
    assert!(
        loc.sym
            .as_deref()
            .unwrap()
            .contains("resolves_own_binary_through_its_mapping"),
        "{loc:?}"
    );
    assert_eq!(loc.vaddr, sym.address() + 1);
    // A forked child shares its parent's mappings.
    s.observe(&Record::Fork(labperf_common::Task {
        pid: 8,
        ppid: 7,
        tid: 8,
        ptid: 7,
        time: 0,
    }));
    assert_eq!(s.resolve(8, sym.address() + bias + 1).sym, loc.sym);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    // A wrong recorded build-id is reported.
    let mut s = Symbolizer::new(Search::new(vec![]));
    s.observe(&Record::Mmap2(Mmap2 {
        pid: 7,
        addr: 0,
        len: 1 << 40,
        path: exe.to_string_lossy().into(),
        build_id: Some(vec![1; 20]),
        ..Default::default()
    }));
    let _ = s.resolve(7, 0x1000);
    assert!(
        s.warnings.iter().any(|w| w.contains("does not match")),
        "{:?}",
        s.warnings
    );
    // Devices and FIFOs named by a recording are never read.
    for p in ["/dev/zero", "/dev/urandom"] {
        let mut s = Symbolizer::new(Search::new(vec![]));
        s.observe(&Record::Mmap2(Mmap2 {
            pid: 1,
            addr: 0,
            len: 1 << 20,
            path: p.into(),
            ..Default::default()
        }));
        assert_eq!(s.resolve(1, 0x10).sym, None);
    }
}

fn header(arch: labperf_common::Arch) -> labperf_common::Header {
    labperf_common::Header {
        agent_version: "test".into(),
        arch,
        endian: labperf_common::Endian::Little,
        kernel_release: String::new(),
        cpu: labperf_common::CpuId::Unknown {
            cpuinfo: String::new(),
        },
        hostname: "this-very-machine".into(),
        command: vec![],
        clock_id: 1,
        start_time_ns: 0,
        start_realtime_ns: 0,
        events: vec![],
        mode: "sample".into(),
        notes: vec![],
    }
}

#[test]
fn cache_entries_are_used_only_with_the_recorded_build_id_and_machine() {
    let d = std::env::temp_dir().join(format!("lp-sym-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let root = d.join("binaries");
    let real = std::fs::read("/bin/true").unwrap();
    let id = Elf::parse(&real)
        .unwrap()
        .build_id
        .expect("/bin/true has a build-id");
    let entry = crate::files::cache::by_build_id(&root, &id).unwrap();
    std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
    let src = crate::record::load::Source::bytes("mem.lpr", Arc::new(Vec::<u8>::new()));
    // What a recording of `arch` (None: no header) resolves "/lab/only/true" of build-id `id` to.
    let resolve = |arch: Option<labperf_common::Arch>| {
        let mut s = Symbolizer::new(Search {
            symfs: vec![],
            cache: Some(root.clone()),
            local: true,
            ..Default::default()
        });
        let h = arch.map(header);
        s.recorded_on(&src, h.as_ref(), None);
        let e = s.binary("/lab/only/true", Some(&id));
        (e.map(|e| e.build_id.clone()), s.warnings)
    };
    std::fs::write(&entry, &real).unwrap();
    assert_eq!(
        resolve(Some(labperf_common::Arch::X86_64)).0,
        Some(Some(id.clone()))
    );
    // Another machine's recording, or one whose machine is unknown: not used.
    let (e, w) = resolve(Some(labperf_common::Arch::Aarch64));
    assert_eq!(e, None);
    assert!(
        w.iter()
            .any(|w| w.contains("not an ELF file of the recording's machine")),
        "{w:?}"
    );
    assert_eq!(resolve(None).0, None);
    // The same bytes claiming another machine (e_machine aarch64): not used.
    let mut arm = real.clone();
    arm[18..20].copy_from_slice(&183u16.to_le_bytes());
    std::fs::write(&entry, &arm).unwrap();
    assert_eq!(resolve(Some(labperf_common::Arch::X86_64)).0, None);
    // Another file under that build-id's name: never used, not even as a last resort.
    std::fs::write(&entry, std::fs::read("/bin/ls").unwrap()).unwrap();
    let (e, w) = resolve(Some(labperf_common::Arch::X86_64));
    assert_eq!(e, None);
    assert!(
        w.iter().any(|w| w.contains("not of the recorded build-id")),
        "{w:?}"
    );
    // A local file with the recorded build-id comes before the cache: a copy in the
    // cache that fits (another file claiming that build-id) does not change what
    // /bin/true resolves to.
    let mut claimed = real.clone();
    claimed.push(0);
    std::fs::write(&entry, &claimed).unwrap();
    assert_eq!(
        resolve(Some(labperf_common::Arch::X86_64)).0,
        Some(Some(id.clone()))
    );
    let mut s = Symbolizer::new(Search {
        symfs: vec![],
        cache: Some(root.clone()),
        local: true,
        ..Default::default()
    });
    let h = header(labperf_common::Arch::X86_64);
    s.recorded_on(&src, Some(&h), None);
    let e = s.binary("/bin/true", Some(&id)).unwrap();
    assert_eq!(e.file.as_deref(), Some(Path::new("/bin/true")));
    std::fs::remove_dir_all(&d).unwrap();
}
