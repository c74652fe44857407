// A score below this is a masked slot in a workgroup tile; real scores are finite and far above it.
const MASKED: f32 = -3.0e38;
const MASKED_TEST: f32 = -1.0e38;

//!include is_nan.wgsl