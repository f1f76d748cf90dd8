//! A LoRA apply from Rust through ocltk's C API (runtime/include/ocltk/ocltk.h), with no crates:
//! the few C functions it uses are declared below and linked from libocltk.so.0 and libOpenCL.
//!
//!   T  = X · Aᵀ                   (shrink, tokens × rank: ocltk_gemm_nt)
//!   Y += (alpha / rank) · T · Bᵀ  (expand into the layer's output: ocltk_gemm_nt_accum,
//!                                  waiting on the shrink's event)
//!
//! Build and run (ctest does this against an installed copy, cmake/test_rust_example.cmake):
//!   rustc -O examples/rust/lora_apply.rs $(pkg-config --libs-only-L ocltk | sed 's/-L/-L /') -o lora_apply
//!   ./lora_apply [--device SEL] [--profile FILE] [--tokens N] [--hidden H] [--rank R]
//!
//! When ocltk gains its one-call LoRA apply, this example switches to it.
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

#[link(name = "ocltk")]
extern "C" {
    fn ocltk_last_error() -> *const c_char;
    fn ocltk_version_string() -> *const c_char;
    fn ocltk_runtime_open(device: *const c_char, profile_path: *const c_char, runtime: *mut Runtime) -> c_int;
    fn ocltk_runtime_release(runtime: Runtime);
    fn ocltk_runtime_context(runtime: Runtime) -> ClContext;
    fn ocltk_runtime_queue(runtime: Runtime) -> ClQueue;
    fn ocltk_runtime_device_name(runtime: Runtime) -> *const c_char;
    fn ocltk_gemm_nt(
        runtime: Runtime,
        dtype: c_int,
        c_dtype: c_int,
        m: i64,
        n: i64,
        k: i64,
        alpha: f32,
        a: ClMem,
        a_offset: usize,
        lda: usize,
        b: ClMem,
        b_offset: usize,
        ldb: usize,
        c: ClMem,
        c_offset: usize,
        ldc: usize,
        queue: ClQueue,
        num_events_in_wait_list: u32,
        event_wait_list: *const ClEvent,
        event: *mut ClEvent,
    ) -> c_int;
    fn ocltk_gemm_nt_accum(
        runtime: Runtime,
        dtype: c_int,
        c_dtype: c_int,
        m: i64,
        n: i64,
        k: i64,
        alpha: f32,
        a: ClMem,
        a_offset: usize,
        lda: usize,
        b: ClMem,
        b_offset: usize,
        ldb: usize,
        c: ClMem,
        c_offset: usize,
        ldc: usize,
        queue: ClQueue,
        num_events_in_wait_list: u32,
        event_wait_list: *const ClEvent,
        event: *mut ClEvent,
    ) -> c_int;
    fn ocltk_choose_gemm_nt(
        runtime: Runtime,
        dtype: c_int,
        c_dtype: c_int,
        m: i64,
        n: i64,
        k: i64,
        choice: *mut Choice,
    ) -> c_int;
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

fn upload(context: ClContext, data: &mut [f32]) -> Result<Buffer, String> {
    let mut err = 0;
    let bytes = std::mem::size_of_val(data);
    let m = unsafe {
        clCreateBuffer(
            context,
            CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
            bytes,
            data.as_mut_ptr().cast(),
            &mut err,
        )
    };
    if err != 0 || m.is_null() {
        return Err(format!("clCreateBuffer({bytes} bytes) failed with {err}"));
    }
    Ok(Buffer(m))
}

fn describe(rt: Runtime, m: i64, n: i64, k: i64) -> Result<String, String> {
    let mut choice: Choice = ptr::null_mut();
    check(
        unsafe { ocltk_choose_gemm_nt(rt, OCLTK_F32, OCLTK_F32, m, n, k, &mut choice) },
        "ocltk_choose_gemm_nt",
    )?;
    let line = text(unsafe { ocltk_choice_describe(choice) });
    unsafe { ocltk_choice_release(choice) };
    Ok(line)
}

fn run(rt: Runtime, tokens: usize, hidden: usize, rank: usize) -> Result<f64, String> {
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
    let (mut x, mut a, mut b, y0) = (
        random(tokens * hidden),
        random(rank * hidden),
        random(hidden * rank),
        random(tokens * hidden),
    );
    let mut y_init = y0.clone();
    let mut t_init = vec![f32::NAN; tokens * rank];
    let (dx, da, db) = (
        upload(context, &mut x)?,
        upload(context, &mut a)?,
        upload(context, &mut b)?,
    );
    let (dy, dt) = (upload(context, &mut y_init)?, upload(context, &mut t_init)?);
    let scale = 2.0 / rank as f32; // alpha / rank with alpha = 2
    let (m, h, r) = (tokens as i64, hidden as i64, rank as i64);

    let mut shrunk: ClEvent = ptr::null_mut();
    check(
        unsafe {
            ocltk_gemm_nt(
                rt,
                OCLTK_F32,
                OCLTK_F32,
                m,
                r,
                h,
                1.0,
                dx.0,
                0,
                0,
                da.0,
                0,
                0,
                dt.0,
                0,
                0,
                ptr::null_mut(),
                0,
                ptr::null(),
                &mut shrunk,
            )
        },
        "shrink",
    )?;
    let mut expanded: ClEvent = ptr::null_mut();
    let status = unsafe {
        ocltk_gemm_nt_accum(
            rt,
            OCLTK_F32,
            OCLTK_F32,
            m,
            h,
            r,
            scale,
            dt.0,
            0,
            0,
            db.0,
            0,
            0,
            dy.0,
            0,
            0,
            ptr::null_mut(),
            1,
            &shrunk,
            &mut expanded,
        )
    };
    unsafe { clReleaseEvent(shrunk) };
    check(status, "expand")?;
    unsafe {
        clWaitForEvents(1, &expanded);
        clReleaseEvent(expanded);
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
    println!("shrink: {}\nexpand: {}", describe(rt, m, r, h)?, describe(rt, m, h, r)?);

    // Every output against a double-precision reference.
    let mut worst = 0f64;
    for i in 0..tokens {
        let t: Vec<f64> = (0..rank)
            .map(|q| {
                (0..hidden)
                    .map(|k| x[i * hidden + k] as f64 * a[q * hidden + k] as f64)
                    .sum()
            })
            .collect();
        for j in 0..hidden {
            let want = y0[i * hidden + j] as f64
                + (0..rank)
                    .map(|q| scale as f64 * t[q] * b[j * rank + q] as f64)
                    .sum::<f64>();
            worst = worst.max((want - y[i * hidden + j] as f64).abs() / (1.0 + want.abs()));
        }
    }
    Ok(worst)
}

fn main() -> ExitCode {
    let (mut device, mut profile) = (None::<String>, None::<String>);
    let (mut tokens, mut hidden, mut rank) = (37usize, 512usize, 16usize);
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        let number = || value.parse::<usize>().ok().filter(|&v| v > 0);
        match pair[0].as_str() {
            "--device" => device = Some(value.clone()),
            "--profile" => profile = Some(value.clone()),
            "--tokens" | "--hidden" | "--rank" => {
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
                    _ => rank = v,
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
    let result = run(rt, tokens, hidden, rank);
    unsafe { ocltk_runtime_release(rt) };
    match result {
        Ok(worst) => {
            println!("max relative error {worst:.3e} over {} outputs", tokens * hidden);
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
