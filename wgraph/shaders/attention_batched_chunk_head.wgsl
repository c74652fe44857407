    let c = wid.x;
//!include attention_batched_head.wgsl