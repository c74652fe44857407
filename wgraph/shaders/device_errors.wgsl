// The device error flag (included; wgraph/device_errors.py reads it on the host). A kernel that finds a value
// it read from a GPU buffer (a kv_len, a position) out of range still stays in bounds, and records the first
// such error here as (site, value, limit); dev.check_errors() and every readback raise it by name.
// Binding 31 keeps clear of every kernel's own bindings; ctx.dispatch binds the device's flag to it.
@group(0) @binding(31) var<storage, read_write> device_errors: array<atomic<u32>, 4>;

// Site codes: wgraph/device_errors.py's SITES names the op, the value and the limit of each.
const ERR_ATTENTION_KV_LEN: u32 = 1u;
const ERR_ROPE_POS: u32 = 2u;
const ERR_KV_APPEND_POS: u32 = 3u;
const ERR_KV_QUANTIZE_POS: u32 = 4u;
const ERR_TIERED_KV_LEN: u32 = 5u;
const ERR_BDPA_KV_LEN: u32 = 6u;
const ERR_EMBEDDING_ID: u32 = 7u;
const ERR_SAMPLE_EMPTY: u32 = 8u;
const ERR_VARLEN_OFFSET: u32 = 9u;
const ERR_VARLEN_DECREASING: u32 = 10u;
const ERR_VARLEN_LENGTH: u32 = 11u;
const ERR_KVCACHE_LEN: u32 = 12u;
const ERR_KVCACHE_PAGE: u32 = 13u;
const ERR_ATTENTION_PAGE: u32 = 14u;
const ERR_KV_APPEND_PAGE: u32 = 15u;
const ERR_KV_QUANTIZE_PAGE: u32 = 16u;
const ERR_TIERED_PAGE: u32 = 17u;
const ERR_VARLEN_FIRST: u32 = 18u;
const ERR_VARLEN_LAST: u32 = 19u;
const ERR_KV_QUANTIZE_RANGE: u32 = 20u;
const ERR_BDPA_BASIS: u32 = 21u;
const ERR_BDPA_RESIDUAL: u32 = 22u;
const ERR_BDPA_POSITION: u32 = 23u;
const ERR_TIERED_QUERIES: u32 = 24u;
const ERR_DECODE_POSITION: u32 = 25u;
const ERR_ATTENTION_RING: u32 = 26u;

fn report_error(site: u32, value: u32, limit: u32) {
    // Word 0 goes from 0 to a site code once; only that winner writes value and limit. A weak exchange may
    // fail spuriously, so retry while the word is still 0.
    loop {
        let r = atomicCompareExchangeWeak(&device_errors[0], 0u, site);
        if (r.exchanged) {
            atomicStore(&device_errors[1], value);
            atomicStore(&device_errors[2], limit);
            return;
        }
        if (r.old_value != 0u) {
            return;
        }
    }
}
