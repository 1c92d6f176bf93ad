//! The process's allocator: jemalloc (see Cargo.toml), here in the library so the daemon, the test daemon and
//! the tools all run on the allocator production runs on; and its options.

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its start (its `malloc_conf` symbol; `MALLOC_CONF` in the environment still
/// overrides them). Freed pages go back to the system within about a quarter of a second (`dirty_decay_ms`,
/// default 10 s) and are not kept as "muzzy" pages on the way: a series-table flush frees tens of MB at once,
/// and with the defaults they stayed resident ~10 s, on top of the next table being filled (bench: A telnet
/// peak RSS 332 -> 273 MiB at 1 s; at the peak of A, jemalloc still held ~120 MB of freed pages beside 139 MB
/// allocated, and 250 ms took A telnet's peak from ~242 to ~218 MiB, B's from 195 to 170, at the same CPU).
/// One arena per CPU, used by whichever thread runs on it (`percpu_arena`), instead of four per CPU: fewer
/// arenas each keeping its own freed pages. jemalloc's background threads do the purging: without them it ran
/// inside whatever allocated next, and a small query right after a large one paid for the large one's freed
/// memory (bench/RESULTS.md: q2 4-26 ms instead of ~0.5 ms after q1).
#[no_mangle]
#[used]
pub static malloc_conf: &[u8; 79] = b"background_thread:true,percpu_arena:percpu,dirty_decay_ms:250,muzzy_decay_ms:0\0";

extern "C" {
    /// jemalloc's control interface (linked through tikv-jemalloc-sys, unprefixed).
    fn mallctl(
        name: *const std::ffi::c_char,
        oldp: *mut std::ffi::c_void,
        oldlenp: *mut usize,
        newp: *mut std::ffi::c_void,
        newlen: usize,
    ) -> std::ffi::c_int;
}

/// The heap as jemalloc sees it, in bytes: what is allocated, the pages holding it (`active`), its own
/// metadata, and what it keeps `resident` (active pages, freed pages not yet given back, metadata): the part of
/// the process's resident set that is heap, and why it may exceed what the tables account for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapStats {
    pub allocated: u64,
    pub active: u64,
    pub metadata: u64,
    pub resident: u64,
}

/// jemalloc's statistics now (`None` if they cannot be read).
pub fn heap_stats() -> Option<HeapStats> {
    let mut epoch: u64 = 1;
    let mut len = std::mem::size_of::<u64>();
    // SAFETY: "epoch" reads and writes a u64; `epoch` and `len` describe one. Writing it refreshes the
    // statistics jemalloc caches.
    let rc = unsafe {
        mallctl(
            c"epoch".as_ptr(),
            (&mut epoch as *mut u64).cast(),
            &mut len,
            (&mut epoch as *mut u64).cast(),
            std::mem::size_of::<u64>(),
        )
    };
    if rc != 0 {
        return None;
    }
    let read = |name: &std::ffi::CStr| -> Option<u64> {
        let mut value: usize = 0;
        let mut len = std::mem::size_of::<usize>();
        // SAFETY: the "stats.*" values read here are size_t; `value` and `len` describe one; nothing is written.
        let rc =
            unsafe { mallctl(name.as_ptr(), (&mut value as *mut usize).cast(), &mut len, std::ptr::null_mut(), 0) };
        (rc == 0).then_some(value as u64)
    };
    Some(HeapStats {
        allocated: read(c"stats.allocated")?,
        active: read(c"stats.active")?,
        metadata: read(c"stats.metadata")?,
        resident: read(c"stats.resident")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // The statistics are read and move with an allocation of ours (jemalloc built with its statistics).
    #[test]
    fn heap_stats_see_an_allocation() {
        let before = heap_stats().expect("jemalloc statistics");
        let block = vec![1u8; 64 << 20];
        let during = heap_stats().unwrap();
        assert!(during.allocated >= before.allocated + (64 << 20) - (1 << 20), "{before:?} {during:?}");
        assert!(during.resident >= during.active && during.active >= during.allocated, "{during:?}");
        drop(block);
    }

    /// One of jemalloc's ssize_t options.
    fn option(name: &std::ffi::CStr) -> Option<isize> {
        let mut value: isize = -2;
        let mut len = std::mem::size_of::<isize>();
        // SAFETY: `name` is NUL-terminated; `value` and `len` describe a writable isize, the options' type;
        // nothing is written (newp null).
        let rc =
            unsafe { mallctl(name.as_ptr(), (&mut value as *mut isize).cast(), &mut len, std::ptr::null_mut(), 0) };
        (rc == 0).then_some(value)
    }

    // The options reach jemalloc from the binary (a `malloc_conf` the linker dropped would leave its defaults,
    // 10000 and 0 or 10000).
    #[test]
    fn the_options_are_in_effect() {
        if std::env::var_os("MALLOC_CONF").is_some() {
            return;
        }
        assert_eq!(option(c"opt.dirty_decay_ms"), Some(250));
        let mut mode: *const std::ffi::c_char = std::ptr::null();
        let mut len = std::mem::size_of::<*const std::ffi::c_char>();
        // SAFETY: "opt.percpu_arena" reads a `const char *` to a static string; `mode` and `len` describe one.
        let rc = unsafe {
            mallctl(
                c"opt.percpu_arena".as_ptr(),
                (&mut mode as *mut *const std::ffi::c_char).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        assert_eq!(rc, 0);
        // SAFETY: jemalloc answered with a pointer to one of its NUL-terminated option names.
        assert_eq!(unsafe { std::ffi::CStr::from_ptr(mode) }, c"percpu");
        assert_eq!(option(c"opt.muzzy_decay_ms"), Some(0));
        let mut on = false;
        let mut len = std::mem::size_of::<bool>();
        // SAFETY: "background_thread" reads a bool; `on` and `len` describe one.
        let rc = unsafe {
            mallctl(c"background_thread".as_ptr(), (&mut on as *mut bool).cast(), &mut len, std::ptr::null_mut(), 0)
        };
        assert_eq!((rc, on), (0, true));
    }
}
