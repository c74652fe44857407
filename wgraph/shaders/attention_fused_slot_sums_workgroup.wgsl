            // a slot spans subgroups (a device whose subgroups are smaller than LPR, such as lavapipe's 8
            // lanes at head_dim 128): the lanes' partials meet in workgroup memory, two barriers a step
            workgroupBarrier();                  // the previous step's sums are read
//!repeat i U * G_TILE
            red[(slot * LPR + lane) * U * G_TILE + ${i}u] = s[$i];
//!end
            workgroupBarrier();
//!repeat i U * G_TILE
            {
                var sum: f32 = 0.0;
                for (var l2: u32 = 0u; l2 < LPR; l2++) {
                    sum += red[(slot * LPR + l2) * U * G_TILE + ${i}u];
                }
                s[$i] = sum;
            }
//!end