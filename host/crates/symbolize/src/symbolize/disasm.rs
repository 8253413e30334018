//! One function's instructions for `labperf annotate`, disassembled by binutils' objdump
//! for the binary's machine (this machine's `objdump`, else `aarch64-linux-gnu-objdump`,
//! `alpha-linux-gnu-objdump` or `x86_64-linux-gnu-objdump`), as `perf annotate` runs it.

use std::path::Path;
use std::process::Command;

/// One instruction: its address in the file's own address space and objdump's text of it
/// (mnemonic and operands, tabs turned into spaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insn {
    pub addr: u64,
    pub text: String,
}

/// Why a function could not be disassembled.
#[derive(Debug, thiserror::Error)]
pub enum DisasmError {
    #[error("labperf has no disassembler for {machine} code")]
    Machine { machine: String },
    #[error("cannot run {program} to disassemble {file} ({err}): install {package} (`apt-get install {package}`; `cargo xtask setup` does)")]
    Missing {
        program: &'static str,
        package: &'static str,
        file: String,
        err: std::io::Error,
    },
    #[error("{program} could not disassemble {file}: {why}")]
    Failed {
        program: &'static str,
        file: String,
        why: String,
    },
}

/// The objdump that reads `machine`'s code (as [`super::symbols::elf_machine`] names
/// machines) on this machine, with its Debian package.
fn objdump(machine: &str) -> Option<(Command, &'static str, &'static str)> {
    if machine == std::env::consts::ARCH {
        return Some((Command::new("objdump"), "objdump", "binutils"));
    }
    Some(match machine {
        "aarch64" => (
            Command::new("aarch64-linux-gnu-objdump"),
            "aarch64-linux-gnu-objdump",
            "binutils-aarch64-linux-gnu",
        ),
        "alpha" => (
            Command::new("alpha-linux-gnu-objdump"),
            "alpha-linux-gnu-objdump",
            "binutils-alpha-linux-gnu",
        ),
        "x86_64" => (
            Command::new("x86_64-linux-gnu-objdump"),
            "x86_64-linux-gnu-objdump",
            "binutils-x86-64-linux-gnu",
        ),
        _ => return None,
    })
}

/// The instructions of `file` (an ELF file for `machine`) from `start` to `end` (its own
/// addresses), in address order: `objdump -d -C --no-show-raw-insn --start-address
/// --stop-address`, as perf annotate asks it.
pub fn disassemble(
    file: &Path,
    machine: &str,
    start: u64,
    end: u64,
) -> Result<Vec<Insn>, DisasmError> {
    let (mut cmd, program, package) = objdump(machine).ok_or_else(|| DisasmError::Machine {
        machine: machine.to_string(),
    })?;
    let shown = file.display().to_string();
    let out = cmd
        .args(["-d", "-C", "--no-show-raw-insn"])
        .arg(format!("--start-address={start:#x}"))
        .arg(format!("--stop-address={end:#x}"))
        .arg(file)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|err| DisasmError::Missing {
            program,
            package,
            file: shown.clone(),
            err,
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(DisasmError::Failed {
            program,
            file: shown,
            why: err
                .trim()
                .lines()
                .last()
                .unwrap_or("no message")
                .to_string(),
        });
    }
    let insns = parse(&String::from_utf8_lossy(&out.stdout));
    if insns.is_empty() {
        return Err(DisasmError::Failed {
            program,
            file: shown,
            why: format!("no instruction from {start:#x} to {end:#x}"),
        });
    }
    Ok(insns)
}

/// The instruction lines of objdump's output (`    11a0:\ttest   %rdi,%rdi`); headings,
/// labels and the `...` of skipped zeros are left out.
pub fn parse(out: &str) -> Vec<Insn> {
    let mut v = Vec::new();
    for l in out.lines() {
        let Some((addr, text)) = l.split_once(":\t") else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr.trim_start(), 16) else {
            continue;
        };
        v.push(Insn {
            addr,
            text: tidy(text),
        });
    }
    v
}

/// objdump's text of an instruction with its tabs turned into spaces: the mnemonic padded
/// to 6 columns as x86's is (Arm and Alpha put a tab after it), other tabs one space.
fn tidy(text: &str) -> String {
    let text = text.trim_end();
    match text.split_once('\t') {
        Some((m, rest)) => format!("{m:<6} {}", rest.replace('\t', " ")),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instruction_lines_of_the_three_machines_are_read() {
        let x86 = "\nhot:     file format elf64-x86-64\n\n\nDisassembly of section .text:\n\n00000000000011a0 <hot>:\n    11a0:\ttest   %rdi,%rdi\n    11a3:\tjle    11f0 <hot+0x50>\n\t...\n";
        assert_eq!(
            parse(x86),
            vec![
                Insn {
                    addr: 0x11a0,
                    text: "test   %rdi,%rdi".into()
                },
                Insn {
                    addr: 0x11a3,
                    text: "jle    11f0 <hot+0x50>".into()
                },
            ]
        );
        let arm = "0000000000000860 <hot>:\n 860:\tfmov\td1, d0\n 878:\tmov\tx1, #0x0                   \t// #0\n";
        assert_eq!(
            parse(arm),
            vec![
                Insn {
                    addr: 0x860,
                    text: "fmov   d1, d0".into()
                },
                Insn {
                    addr: 0x878,
                    text: "mov    x1, #0x0                    // #0".into()
                },
            ]
        );
        let alpha = "00000001200006a0 <hot>:\n   1200006a0:\tldah\tgp,2(t12)\n";
        assert_eq!(
            parse(alpha),
            vec![Insn {
                addr: 0x1200006a0,
                text: "ldah   gp,2(t12)".into()
            }]
        );
    }
}
