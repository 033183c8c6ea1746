//! The GPU engine's layer (layer.rs) on the emulated device against the CPU engine's layer
//! (../cpu/layer.rs) on the same weights and rows: output, input gradient and all twelve weight
//! gradients (accumulated onto values already there), with dropout off and at every site.
use super::assert_close as close;
use super::buffers::{Bf16Weights, Dims, LayerAddrs, LayerParams, LayerTape, Rows, Scratch};
use super::device::{Buf, Device};
use super::emulated::Emulated;
use super::layer;
use super::products;
use crate::model::engine::cpu::gemm::Gemm;
use crate::model::engine::cpu::layer::{self as cpu, LayerGrads, Pass, Sites};
use crate::model::engine::cpu::packed_attention::Heads;
use crate::model::engine::packed::Packed;
use crate::model::engine::weights::LayerW;
use crate::model::kernels::blas::Blas;
use crate::model::kernels::dropout_hash::Mask;
use crate::model::kernels::precision::Precision;
use crate::model::kernels::test_data;

fn scaled(n: usize, seed: u32, s: f32) -> Vec<f32> {
    test_data(n, seed).iter().map(|v| v * s).collect()
}

#[test]
fn a_layer_matches_the_cpu_engine() {
    let Some(dev) = Emulated::for_test("the emulated GPU layer") else {
        return;
    };
    let blas = dev.blas();
    layer_matches(&dev, blas, Precision::F32);
}

/// --precision bf16: the products on bf16 operands (the kernels' `to_bf16`, a bf16 GEMM) against
/// the CPU engine's bf16 training layer (bf16 Linears, f32 attention).
#[test]
fn a_bf16_layer_matches_the_cpu_engine() {
    let check = "the emulated GPU layer in bf16";
    if let Err(why) = Precision::Bf16.check_cpu("--precision") {
        return crate::runtime::skipped(check, "avx512bf16", &why.to_string());
    }
    let Some(dev) = Emulated::for_test(check) else {
        return;
    };
    let blas = dev.blas();
    layer_matches(&dev, blas, Precision::Bf16);
}

/// The same check on a GPU: the cuBLAS products, NVRTC's build of gpu/kernels/, the driver's
/// memory (a `cuda` build's test binary, run on the lent machine: scripts/README.md).
#[cfg(feature = "cuda")]
#[test]
fn a_layer_on_the_gpu_matches_the_cpu_engine() {
    let Some(blas) = crate::model::kernels::blas::blas() else {
        return crate::runtime::skipped("the GPU layer on a GPU", "blas", "no BLAS here");
    };
    let Ok(candle_core::Device::Cuda(gpu)) = candle_core::Device::new_cuda(0) else {
        return crate::runtime::skipped("the GPU layer on a GPU", "gpu", "no CUDA device");
    };
    let cuda = super::cuda::Cuda::new(&gpu).unwrap();
    layer_matches(&cuda, blas, Precision::F32);
    if Precision::Bf16.check_cpu("--precision").is_ok() {
        layer_matches(&cuda, blas, Precision::Bf16);
    }
}

/// The GPU engine's layer on `dev` against the CPU engine's, at head widths 32 (two heads) and
/// 64 (one), over five items (one empty), dropout off and at all three sites, the products in
/// `precision` (f32 or bf16) on both.
fn layer_matches<D: Device>(dev: &D, blas: &Blas, precision: Precision) {
    let bf16 = precision == Precision::Bf16;
    // bf16: the two sides round f32 values that differ in their last bits (other kernels, other
    // sums) and so now and then to neighbouring bf16 values
    let tol = if bf16 { 2e-3 } else { 1e-4 };
    for (heads, dim) in [(2usize, 32usize), (1, 64)] {
        let (h, i) = (heads * dim, 2 * heads * dim);
        let d = Dims {
            hidden: h,
            intermediate: i,
            heads,
            scale: 1.0 / (dim as f32).sqrt(),
        };
        let gamma = |seed| -> Vec<f32> { scaled(h, seed, 0.3).iter().map(|v| 1.0 + v).collect() };
        // the twelve tensors in LayerAddrs' order
        let values: Vec<Vec<f32>> = vec![
            scaled(3 * h * h, 1, 0.2),
            scaled(3 * h, 2, 0.1),
            scaled(h * h, 3, 0.2),
            scaled(h, 4, 0.1),
            gamma(5),
            scaled(h, 6, 0.1),
            scaled(i * h, 7, 0.2),
            scaled(i, 8, 0.1),
            scaled(h * i, 9, 0.2),
            scaled(h, 10, 0.1),
            gamma(11),
            scaled(h, 12, 0.1),
        ];
        let (eps1, eps2) = (1e-12f32, 1e-5f32);
        let w = LayerW {
            packed: Default::default(),
            qkv: None,
            wqkv: values[0].clone(),
            bqkv: values[1].clone(),
            wo: &values[2],
            bo: &values[3],
            g1: &values[4],
            b1: &values[5],
            wi: &values[6],
            bi: &values[7],
            wd: &values[8],
            bd: &values[9],
            g2: &values[10],
            b2: &values[11],
            eps1,
            eps2,
        };
        let bufs: Vec<Buf<D, f32>> = values.iter().map(|v| Buf::of(dev, v).unwrap()).collect();
        let addrs = |b: &[Buf<D, f32>]| LayerAddrs::of(std::array::from_fn(|k| b[k].at(0)));
        // the four product weights' bf16 copies (the stack makes them each forward)
        let wb: Vec<Buf<D, u16>> = [0usize, 2, 6, 8]
            .iter()
            .map(|&k| {
                let b = Buf::zeros(dev, values[k].len()).unwrap();
                let n = values[k].len();
                products::to_bf16(dev, bufs[k].at(0), (n, n), b.at(0)).unwrap();
                b
            })
            .collect();
        let params = LayerParams {
            w: addrs(&bufs),
            bf16: bf16.then(|| Bf16Weights {
                wqkv: wb[0].at(0),
                wo: wb[1].at(0),
                wi: wb[2].at(0),
                wd: wb[3].at(0),
            }),
            eps1,
            eps2,
        };

        let lens = vec![5usize, 40, 1, 0, 12];
        let p = Packed::new(lens.clone(), &[41, 42, 43, 44, 45]).unwrap();
        let t = p.rows();
        let off: Vec<i32> = p.offsets().iter().map(|&o| o as i32).collect();
        let len: Vec<i32> = lens.iter().map(|&n| n as i32).collect();
        let (offb, lenb, idb) = (
            Buf::of(dev, &off).unwrap(),
            Buf::of(dev, &len).unwrap(),
            Buf::of(dev, p.row_ids()).unwrap(),
        );
        let rows = Rows {
            t,
            items: lens.len(),
            off: offb.at(0),
            len: lenb.at(0),
            row_ids: idb.at(0),
        };
        let x = scaled(t * h, 13, 1.0);
        let dout = scaled(t * h, 14, 1.0);
        let all = Sites {
            attention: Mask::new(101, 0.1),
            attention_out: Mask::new(102, 0.1),
            ffn_out: Mask::new(103, 0.1),
        };
        for sites in [Sites::default(), all] {
            // the CPU engine's layer
            let g = Gemm { blas, precision };
            let a = Heads {
                heads,
                dim,
                scale: d.scale,
            };
            let (out, tape) =
                cpu::forward(g, &w, x.clone(), &p, a, &sites, Pass::Train { keep: true }).unwrap();
            let mut gr = LayerGrads::zeros(h, i);
            let starts: Vec<Vec<f32>> = values
                .iter()
                .enumerate()
                .map(|(k, v)| scaled(v.len(), 50 + k as u32, 0.01))
                .collect();
            for (dst, s) in [
                &mut gr.wqkv,
                &mut gr.bqkv,
                &mut gr.wo,
                &mut gr.bo,
                &mut gr.g1,
                &mut gr.b1,
                &mut gr.wi,
                &mut gr.bi,
                &mut gr.wd,
                &mut gr.bd,
                &mut gr.g2,
                &mut gr.b2,
            ]
            .into_iter()
            .zip(&starts)
            {
                dst.copy_from_slice(s);
            }
            let dx = cpu::backward(g, &w, tape.unwrap(), &dout, &p, a, &sites, &mut gr).unwrap();

            // the GPU engine's, with room for more rows than the batch has
            let gtape = LayerTape::new(dev, t + 7, d).unwrap();
            let scratch = Scratch::new(dev, (t + 7, lens.len() + 1), d, bf16, true).unwrap();
            gtape.x.write(dev, 0, &x).unwrap();
            let gout = Buf::<D, f32>::zeros(dev, (t + 7) * h).unwrap();
            layer::forward(dev, &params, d, &rows, &sites, &gtape, &scratch, gout.at(0)).unwrap();
            close(
                "layer output",
                &gout.read(dev, 0, t * h).unwrap(),
                &out,
                tol,
            );
            let gbufs: Vec<Buf<D, f32>> = starts.iter().map(|v| Buf::of(dev, v).unwrap()).collect();
            let dbuf = Buf::of(dev, &dout).unwrap();
            let before = dev.counts();
            layer::backward(
                dev,
                &params,
                d,
                &rows,
                &sites,
                &gtape,
                &scratch,
                dbuf.at(0),
                &addrs(&gbufs),
            )
            .unwrap();
            let spent = dev.counts();
            assert_eq!(
                spent.allocations, before.allocations,
                "backward allocated on the device"
            );
            let what = |name: &str| {
                let drop = sites.attention.is_some();
                format!("{name} (d {dim}, dropout {drop}, {})", precision.name())
            };
            close(
                &what("dx"),
                &scratch.dx().read(dev, 0, t * h).unwrap(),
                &dx,
                tol,
            );
            let want = [
                &gr.wqkv, &gr.bqkv, &gr.wo, &gr.bo, &gr.g1, &gr.b1, &gr.wi, &gr.bi, &gr.wd, &gr.bd,
                &gr.g2, &gr.b2,
            ];
            let names = [
                "wqkv", "bqkv", "wo", "bo", "g1", "b1", "wi", "bi", "wd", "bd", "g2", "b2",
            ];
            for ((b, wv), name) in gbufs.iter().zip(want).zip(names) {
                close(&what(name), &b.read(dev, 0, b.len()).unwrap(), wv, tol);
            }
        }
    }
}
