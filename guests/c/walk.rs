//! walk: a Rust WASI command (std::fs over the preopened directory). For each argument (default ".")
//! it prints every entry below it, depth first, names sorted bytewise: "d PATH" for a directory and
//! "f SIZE FNV64 PATH" for a file (its bytes read through std::fs::File, hashed with FNV-1a).
//! An unreadable path is reported on stderr and makes the exit status 1.
use std::fs;
use std::io::Read;
use std::process::exit;

fn fnv(path: &str) -> std::io::Result<(u64, u64)> {
    let mut file = fs::File::open(path)?;
    let mut buf = vec![0u8; 65536];
    let (mut hash, mut size) = (0xcbf29ce484222325u64, 0u64);
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok((size, hash));
        }
        for &b in &buf[..n] {
            hash = (hash ^ b as u64).wrapping_mul(0x100000001b3);
        }
        size += n as u64;
    }
}

fn walk(dir: &str, failed: &mut bool) {
    let mut names: Vec<(String, bool)> = match fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .map(|e| {
                let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                (e.file_name().to_string_lossy().into_owned(), is_dir)
            })
            .collect(),
        Err(err) => {
            eprintln!("walk: {}: {}", dir, err);
            *failed = true;
            return;
        }
    };
    names.sort();
    for (name, is_dir) in names {
        let path = format!("{}/{}", dir, name);
        if is_dir {
            println!("d {}", path);
            walk(&path, failed);
        } else {
            match fnv(&path) {
                Ok((size, hash)) => println!("f {} {:016x} {}", size, hash, path),
                Err(err) => {
                    eprintln!("walk: {}: {}", path, err);
                    *failed = true;
                }
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let roots = if args.is_empty() { vec![".".to_string()] } else { args };
    let mut failed = false;
    for root in &roots {
        walk(root, &mut failed);
    }
    exit(if failed { 1 } else { 0 });
}
