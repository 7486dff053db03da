//! Picking the device the models run on, once, at start-up.

use candle_core::Device;

use crate::error::{Error, Result};

/// The first GPU. A CUDA build loads libcuda at run time and panics where there is none
/// (cudarc's dynamic loading): the probe runs under `catch_unwind`, its panic message silenced,
/// and that case becomes an error.
pub fn cuda_device() -> Result<Device> {
    if !candle_core::utils::cuda_is_available() {
        return Err(Error::Device("this binary was built without CUDA (cargo build --features cuda)".into()));
    }
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let d = std::panic::catch_unwind(|| Device::new_cuda(0));
    std::panic::set_hook(hook);
    match d {
        Ok(r) => Ok(r?),
        Err(_) => Err(Error::Device("no CUDA driver (libcuda) on this machine".into())),
    }
}

/// The first GPU when built with CUDA and one is usable, else the CPU.
pub fn default_device() -> Device {
    if !candle_core::utils::cuda_is_available() {
        return Device::Cpu;
    }
    cuda_device().unwrap_or_else(|e| {
        tracing::warn!(error = %e, "no usable GPU; the models run on the CPU");
        Device::Cpu
    })
}

/// `cpu` or `cuda`.
pub fn parse_device(name: &str) -> Result<Device> {
    match name {
        "cpu" => Ok(Device::Cpu),
        "cuda" => cuda_device(),
        d => Err(Error::Device(format!("device {d:?}: cpu or cuda"))),
    }
}
