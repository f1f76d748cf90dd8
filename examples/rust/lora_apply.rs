//! A LoRA apply from Rust through ocltk's C API (runtime/include/ocltk/ocltk.h), with no crates:
//! the few C functions and structs it uses are declared below and linked from libocltk.so.0 and
//! libOpenCL.
//!
//!   Y += (alpha / r_l) · (X · A_lᵀ) · B_lᵀ   for the rows of adapter l, in one call
//!                                             (ocltk_lora_apply; T = X·Aᵀ stays on the device)
//!
//! With one adapter (the default) every row uses it. With `--adapters L` the rows are split
//! evenly into L segments, segment l on adapter l of rank R, R/2, R/4, ... (at least 1), and a
//! last segment of rows without adapter (-1), left as they are: a serving batch that mixes
//! adapters, in one launch.
//!
//! Build and run (ctest does this against an installed copy, cmake/test_rust_example.cmake):
//!   rustc -O examples/rust/lora_apply.rs $(pkg-config --libs-only-L ocltk | sed 's/-L/-L /') -o lora_apply
//!   ./lora_apply [--device SEL] [--profile FILE] [--tokens N] [--hidden H] [--rank R] [--adapters L]
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::process::ExitCode;
use std::ptr;

type Runtime = *mut c_void; // ocltk_runtime*
type Choice = *mut c_void; // ocltk_choice*
type ClMem = *mut c_void;
type ClEvent = *mut c_void;
type ClQueue = *mut c_void;
type ClContext = *mut c_void;

const OCLTK_SUCCESS: c_int = 0;
const OCLTK_F32: c_int = 0;
const CL_MEM_READ_WRITE: u64 = 1 << 0;
const CL_MEM_COPY_HOST_PTR: u64 = 1 << 5;
const CL_TRUE: u32 = 1;

/// ocltk_lora_adapters: L adapters' A (L x R x K) and B (L x N x R) stacked, their ranks and
/// scales (null: R each, and the call's scale alone).
#[repr(C)]
struct LoraAdapters {
    adapters: i64,
    max_rank: i64,
    a: ClMem,
    a_offset: usize,
    lda: usize,
    a_stride: usize,
    b: ClMem,
    b_offset: usize,
    ldb: usize,
    b_stride: usize,
    ranks: ClMem,
    scales: ClMem,
}

/// ocltk_lora_segments: rows offsets[s] .. offsets[s+1]-1 on adapter segment_adapters[s].
#[repr(C)]
struct LoraSegments {
    count: i64,
    offsets: ClMem,
    segment_adapters: ClMem,
}

#[link(name = "ocltk")]
extern "C" {
    fn ocltk_last_error() -> *const c_char;
    fn ocltk_version_string() -> *const c_char;
    fn ocltk_runtime_open(device: *const c_char, profile_path: *const c_char, runtime: *mut Runtime) -> c_int;
    fn ocltk_runtime_release(runtime: Runtime);
    fn ocltk_runtime_context(runtime: Runtime) -> ClContext;
    fn ocltk_runtime_queue(runtime: Runtime) -> ClQueue;
    fn ocltk_runtime_device_name(runtime: Runtime) -> *const c_char;
    fn ocltk_lora_apply(
        runtime: Runtime,
        dtype: c_int,
        m: i64,
        n: i64,
        k: i64,
        x: ClMem,
        x_offset: usize,
        ldx: usize,
        adapters: *const LoraAdapters,
        segments: *const LoraSegments,
        scale: f32,
        accumulate: c_int,
        y: ClMem,
        y_offset: usize,
        ldy: usize,
        intermediate: ClMem,
        t_offset: usize,
        ldt: usize,
        validate: c_int,
        queue: ClQueue,
        num_events_in_wait_list: u32,
        event_wait_list: *const ClEvent,
        event: *mut ClEvent,
    ) -> c_int;
    fn ocltk_last_choice(runtime: Runtime, choice: *mut Choice) -> c_int;
    fn ocltk_choice_describe(choice: Choice) -> *const c_char;
    fn ocltk_choice_release(choice: Choice);
}

#[link(name = "OpenCL")]
extern "C" {
    fn clCreateBuffer(context: ClContext, flags: u64, size: usize, host: *mut c_void, err: *mut i32) -> ClMem;
    fn clEnqueueReadBuffer(
        queue: ClQueue,
        buffer: ClMem,
        blocking: u32,
        offset: usize,
        size: usize,
        host: *mut c_void,
        num_events: u32,
        wait_list: *const ClEvent,
        event: *mut ClEvent,
    ) -> i32;
    fn clWaitForEvents(num_events: u32, list: *const ClEvent) -> i32;
    fn clReleaseEvent(event: ClEvent) -> i32;
    fn clReleaseMemObject(buffer: ClMem) -> i32;
}

fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The C API's status as a Result carrying the thread's one-line message.
fn check(status: c_int, what: &str) -> Result<(), String> {
    if status == OCLTK_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {}", text(unsafe { ocltk_last_error() })))
    }
}

struct Buffer(ClMem);
impl Drop for Buffer {
    fn drop(&mut self) {
        unsafe { clReleaseMemObject(self.0) };
    }
}

/// A device copy of a host slice of plain values (f32, i32, u32).
fn upload<T: Copy>(context: ClContext, data: &[T]) -> Result<Buffer, String> {
    let mut err = 0;
    let bytes = std::mem::size_of_val(data);
    let mut copy = data.to_vec();
    let m = unsafe {
        clCreateBuffer(
            context,
            CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
            bytes,
            copy.as_mut_ptr().cast(),
            &mut err,
        )
    };
    if err != 0 || m.is_null() {
        return Err(format!("clCreateBuffer({bytes} bytes) failed with {err}"));
    }
    Ok(Buffer(m))
}

fn last_choice(rt: Runtime) -> Result<String, String> {
    let mut choice: Choice = ptr::null_mut();
    check(unsafe { ocltk_last_choice(rt, &mut choice) }, "ocltk_last_choice")?;
    let line = text(unsafe { ocltk_choice_describe(choice) });
    unsafe { ocltk_choice_release(choice) };
    Ok(line)
}

/// Rows of each segment and its adapter (-1: none): one segment of all rows on adapter 0 for
/// one adapter; else L even segments on adapters 0 .. L-1 and a last quarter-sized one on none.
fn segments_of(tokens: usize, adapters: usize) -> (Vec<u32>, Vec<i32>) {
    if adapters == 1 {
        return (vec![0, tokens as u32], vec![0]);
    }
    let served = tokens - tokens / 4;
    let mut offsets: Vec<u32> = (0..=adapters).map(|s| (served * s / adapters) as u32).collect();
    offsets.push(tokens as u32);
    let mut ids: Vec<i32> = (0..adapters as i32).collect();
    ids.push(-1);
    (offsets, ids)
}

fn run(rt: Runtime, tokens: usize, hidden: usize, rank: usize, adapters: usize) -> Result<f64, String> {
    let context = unsafe { ocltk_runtime_context(rt) };
    let queue = unsafe { ocltk_runtime_queue(rt) };
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7);
    println!("seed {seed}");
    let mut random = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    };
    // X: tokens x hidden; A: L x R x hidden; B: L x hidden x R; Y: tokens x hidden, added to.
    let (x, a, b, y0) = (
        random(tokens * hidden),
        random(adapters * rank * hidden),
        random(adapters * hidden * rank),
        random(tokens * hidden),
    );
    let ranks: Vec<i32> = (0..adapters).map(|l| ((rank >> (l % 4)).max(1)) as i32).collect();
    let alpha = 2.0f32;
    let scales: Vec<f32> = ranks.iter().map(|&r| alpha / r as f32).collect();
    let (offsets, segment_adapters) = segments_of(tokens, adapters);

    let (dx, da, db, dy) = (
        upload(context, &x)?,
        upload(context, &a)?,
        upload(context, &b)?,
        upload(context, &y0)?,
    );
    let (dranks, dscales) = (upload(context, &ranks)?, upload(context, &scales)?);
    let (doffsets, dsegments) = (upload(context, &offsets)?, upload(context, &segment_adapters)?);
    let stack = LoraAdapters {
        adapters: adapters as i64,
        max_rank: rank as i64,
        a: da.0,
        a_offset: 0,
        lda: 0,
        a_stride: 0,
        b: db.0,
        b_offset: 0,
        ldb: 0,
        b_stride: 0,
        ranks: dranks.0,
        scales: dscales.0,
    };
    let segments = LoraSegments {
        count: segment_adapters.len() as i64,
        offsets: doffsets.0,
        segment_adapters: dsegments.0,
    };
    let (m, h) = (tokens as i64, hidden as i64);
    let mut applied: ClEvent = ptr::null_mut();
    check(
        unsafe {
            ocltk_lora_apply(
                rt,
                OCLTK_F32,
                m,
                h,
                h,
                dx.0,
                0,
                0,
                &stack,
                if adapters == 1 { ptr::null() } else { &segments },
                1.0,
                1, // accumulate into the layer's output
                dy.0,
                0,
                0,
                ptr::null_mut(), // the runtime's own scratch, where the choice needs one
                0,
                0,
                1, // validate: read the segments and ranks back and check them
                ptr::null_mut(),
                0,
                ptr::null(),
                &mut applied,
            )
        },
        "ocltk_lora_apply",
    )?;
    unsafe {
        clWaitForEvents(1, &applied);
        clReleaseEvent(applied);
    }
    let mut y = vec![0f32; tokens * hidden];
    let err = unsafe {
        clEnqueueReadBuffer(
            queue,
            dy.0,
            CL_TRUE,
            0,
            y.len() * 4,
            y.as_mut_ptr().cast(),
            0,
            ptr::null(),
            ptr::null_mut(),
        )
    };
    if err != 0 {
        return Err(format!("clEnqueueReadBuffer failed with {err}"));
    }
    println!("{}", last_choice(rt)?);

    // Every output against a double-precision reference.
    let mut worst = 0f64;
    for s in 0..segment_adapters.len() {
        let l = segment_adapters[s];
        for i in offsets[s] as usize..offsets[s + 1] as usize {
            let (r, scale) = if l < 0 {
                (0, 0.0)
            } else {
                (ranks[l as usize] as usize, scales[l as usize] as f64)
            };
            let (al, bl) = (l.max(0) as usize * rank * hidden, l.max(0) as usize * hidden * rank);
            let t: Vec<f64> = (0..r)
                .map(|q| {
                    (0..hidden)
                        .map(|k| x[i * hidden + k] as f64 * a[al + q * hidden + k] as f64)
                        .sum()
                })
                .collect();
            for j in 0..hidden {
                let want =
                    y0[i * hidden + j] as f64 + scale * (0..r).map(|q| t[q] * b[bl + j * rank + q] as f64).sum::<f64>();
                worst = worst.max((want - y[i * hidden + j] as f64).abs() / (1.0 + want.abs()));
            }
        }
    }
    Ok(worst)
}

fn main() -> ExitCode {
    let (mut device, mut profile) = (None::<String>, None::<String>);
    let (mut tokens, mut hidden, mut rank, mut adapters) = (37usize, 512usize, 16usize, 1usize);
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        let number = || value.parse::<usize>().ok().filter(|&v| v > 0);
        match pair[0].as_str() {
            "--device" => device = Some(value.clone()),
            "--profile" => profile = Some(value.clone()),
            "--tokens" | "--hidden" | "--rank" | "--adapters" => {
                let v = match number() {
                    Some(v) => v,
                    None => {
                        eprintln!("lora_apply: {} expects a positive integer, got '{}'", pair[0], value);
                        return ExitCode::from(2);
                    }
                };
                match pair[0].as_str() {
                    "--tokens" => tokens = v,
                    "--hidden" => hidden = v,
                    "--rank" => rank = v,
                    _ => adapters = v,
                }
            }
            other => {
                eprintln!("lora_apply: unknown option {other}");
                return ExitCode::from(2);
            }
        }
    }
    let device = device.map(|d| CString::new(d).expect("device selector"));
    let profile = profile.map(|p| CString::new(p).expect("profile path"));
    let mut rt: Runtime = ptr::null_mut();
    let opened = unsafe {
        ocltk_runtime_open(
            device.as_ref().map_or(ptr::null(), |d| d.as_ptr()),
            profile.as_ref().map_or(ptr::null(), |p| p.as_ptr()),
            &mut rt,
        )
    };
    if let Err(message) = check(opened, "lora_apply") {
        eprintln!("{message}");
        return ExitCode::from(1);
    }
    println!(
        "ocltk {} on {}",
        text(unsafe { ocltk_version_string() }),
        text(unsafe { ocltk_runtime_device_name(rt) })
    );
    let result = run(rt, tokens, hidden, rank, adapters);
    unsafe { ocltk_runtime_release(rt) };
    match result {
        Ok(worst) => {
            println!(
                "max relative error {worst:.3e} over {} outputs ({adapters} adapter{})",
                tokens * hidden,
                if adapters == 1 { "" } else { "s" }
            );
            if worst < 1e-4 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(message) => {
            eprintln!("lora_apply: {message}");
            ExitCode::from(1)
        }
    }
}
