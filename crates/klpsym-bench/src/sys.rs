//! The few system calls the experiment needs: CPU pinning, SCHED_FIFO, absolute sleeps.
//! The only unsafe code in klpsym; each call's contract is stated where it is made.
#![allow(unsafe_code)]

use std::io;
use std::time::Duration;

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set; CPU_SET writes inside it;
    // sched_setaffinity(0, ...) reads `size_of::<cpu_set_t>()` bytes from a live local.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Makes the calling thread SCHED_FIFO at `priority` (needs CAP_SYS_NICE).
pub fn set_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 = the calling thread; `param` is a live, initialized struct.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Back to SCHED_OTHER.
pub fn set_normal() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as in set_fifo.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// CLOCK_MONOTONIC now, in nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec the call fills in.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns`.
pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a live timespec; the remaining-time pointer may be null with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            break;
        }
    }
}

/// The kernel's RT throttling budget: sched_rt_runtime_us / sched_rt_period_us.
pub fn rt_throttling() -> Option<(Duration, Duration)> {
    let read = |p: &str| std::fs::read_to_string(p).ok()?.trim().parse::<i64>().ok();
    let runtime = read("/proc/sys/kernel/sched_rt_runtime_us")?;
    let period = read("/proc/sys/kernel/sched_rt_period_us")?;
    if runtime < 0 {
        return None;
    }
    Some((
        Duration::from_micros(runtime as u64),
        Duration::from_micros(period as u64),
    ))
}

/// CPU time the calling thread has used: the work clock for reschedule-bound statistics.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec the call fills in.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The fresh pages the calling thread has made the kernel allocate: its page faults (minor
/// and major) and the pages its file reads and writes brought into the page cache (block
/// input and output, counted in 512-byte units when the I/O is issued or the page dirtied).
/// Each is a page the kernel takes from its free memory, a first touch of the machine's
/// memory alike (on a VM whose free pages went back to the host, a host-side fault): what the
/// reschedule-bound gate counts per stretch, to judge such a stretch against the machine's
/// first-touch noise.
pub fn thread_fresh_pages() -> u64 {
    // SAFETY: rusage is plain data (zeroed is valid); getrusage fills the live local.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_THREAD, &mut ru) != 0 {
            return 0;
        }
        let blocks = (ru.ru_inblock as u64).saturating_add(ru.ru_oublock as u64);
        (ru.ru_minflt as u64)
            .saturating_add(ru.ru_majflt as u64)
            .saturating_add(blocks / 8)
    }
}
