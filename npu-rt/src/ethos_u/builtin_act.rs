//! The NPU's built-in SIGMOID and TANH activation functions (16-bit OFMs), which compute
//! TFLite's int16 LOGISTIC and TANH.
//!
//! The output stage first scales the accumulator by `OFM_SCALE` into units of `1/(3 * 4096)`
//! (TFLite's `input_multiplier` / `input_left_shift`, see `docs/act.md`), then maps that value
//! `v` through a 256-entry table of `sigmoid(i / 24)` in 0.16 fixed point with linear
//! interpolation: sigmoid reads the table at `|v| / 512`, tanh at `|v| / 256` (as `tanh(x) =
//! 2 sigmoid(2x) - 1`); the negative half is mirrored. Results are Q0.15: sigmoid in `1..=32767`,
//! tanh in `-32767..=32767`.
//!
//! Facts: TFLite's `reference_integer_ops::Logistic` / `Tanh` for int16 and their table
//! `sigmoid_table_uint16` (also CMSIS-NN's `arm_nntables.c`); Vela 5.2.0 emits these functions
//! for int16 LOGISTIC/TANH (`register_command_stream_generator.py`,
//! `generate_ofm_scaling_for_pooling`). Pinned by the fixtures `op_logistic_int16*` and
//! `op_tanh_int16*`, two of them exhaustive over every int16 input, on Vela's streams.

/// `sigmoid(i / 24)` in 0.16 fixed point, `i = 0..256` (TFLite's `sigmoid_table_uint16`; the
/// entries are tuned for interpolation, not the rounded function values).
pub const SIGMOID_TABLE: [u16; 256] = [
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794,
    41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443,
    48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374,
    54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544,
    58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279,
    61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990,
    63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030,
    64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652,
    64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019,
    65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234,
    65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476,
    65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516,
    65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529,
    65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532,
    65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534,
    65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
];

/// Interpolated table value at `a / 2^frac_bits` table steps, scaled by `2^frac_bits`, or `None`
/// past the table's last interval.
#[inline]
fn interpolate(a: u64, frac_bits: u32) -> Option<u64> {
    let i = usize::try_from(a >> frac_bits).ok()?;
    let lo = u64::from(*SIGMOID_TABLE.get(i)?);
    let hi = u64::from(*SIGMOID_TABLE.get(i + 1)?);
    // The table increases, so `hi - lo` does not underflow.
    Some((lo << frac_bits) + (a & ((1 << frac_bits) - 1)) * (hi - lo))
}

/// The built-in SIGMOID of `v` (units of `1/(3 * 4096)`), Q0.15.
#[inline]
pub fn sigmoid(v: i64) -> i64 {
    // 0.16 value times 2^9; saturates to (almost) 1 at |v| >= 255 * 512.
    let r = interpolate(v.unsigned_abs(), 9).unwrap_or(0x7fff << 10) as i64;
    // Back to Q0.15 with rounding; the negative half is 1 - sigmoid(|v|).
    let r = if v >= 0 {
        r + (1 << 9)
    } else {
        (1 << 25) - r + (1 << 9) - 1
    };
    r >> 10
}

/// The built-in TANH of `v` (units of `1/(3 * 4096)`), Q0.15.
#[inline]
pub fn tanh(v: i64) -> i64 {
    // sigmoid(2x) as 0.16 times 2^8; saturates at |v| >= 255 * 256.
    let r = interpolate(v.unsigned_abs(), 8).unwrap_or(0xffff << 8) as i64;
    // 2 sigmoid(2x) - 1, rounded to Q0.15; odd symmetry for the negative half.
    let r = if v >= 0 {
        r - (1 << 23) + (1 << 7)
    } else {
        -r + (1 << 23) + (1 << 7) - 1
    };
    r >> 8
}

/// TFLite's whole int16 LOGISTIC (`tanh` false) or TANH of one raw input: the rescale
/// `(x * multiplier + 2^(shift-1)) >> shift` into units of `1/(3 * 4096)`, then [`sigmoid`] or
/// [`tanh`] (the reference interpreter's and the CPU kernel's arithmetic).
#[inline]
pub fn int16_kernel(x: i16, multiplier: u32, shift: u32, tanh_fn: bool) -> i16 {
    use crate::ethos_u::{numerics, regs::RoundMode};
    let v = numerics::scale(i64::from(x), multiplier, shift, RoundMode::Natural, 0);
    let y = if tanh_fn { tanh(v) } else { sigmoid(v) };
    // Both functions stay within -32767..=32767.
    y as i16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_follows_the_function() {
        // Entries are within 1.2 of 65536 sigmoid(i / 24) (tuned, not rounded; the last is 65535).
        for (i, &t) in SIGMOID_TABLE.iter().enumerate() {
            let exact = 65536.0 / (1.0 + (-(i as f64) / 24.0).exp());
            assert!((f64::from(t) - exact).abs() < 1.2, "{i}: {t} vs {exact}");
        }
        assert!(SIGMOID_TABLE.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn ranges_and_symmetry() {
        assert_eq!(sigmoid(0), 16384);
        assert_eq!(tanh(0), 0);
        for v in [1i64 << 17, 1 << 30, i64::MAX] {
            assert_eq!(sigmoid(v), 32767);
            assert_eq!(sigmoid(-v), 1);
            assert_eq!(tanh(v), 32767);
            assert_eq!(tanh(-v), -32767);
        }
        assert_eq!(sigmoid(i64::MIN), 1);
        for v in (-140_000..140_000).step_by(7) {
            let (s, t) = (sigmoid(v), tanh(v));
            assert!(
                (1..=32767).contains(&s) && (-32767..=32767).contains(&t),
                "{v}"
            );
            assert!((s + sigmoid(-v) - 32768).abs() <= 1, "{v}");
            assert!((t + tanh(-v)).abs() <= 1, "{v}");
        }
    }
}
