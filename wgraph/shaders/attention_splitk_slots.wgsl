        workgroupBarrier();                      // red's previous contents are read
        if (in_slot) {
//!repeat e PV4
            {
                let a = acc[${hh}u * PV4 + ${e}u];
                let at = slot * D + lane * ELEMS + ${e}u * 4u;
                red[at] = a.x;
                red[at + 1u] = a.y;
                red[at + 2u] = a.z;
                red[at + 3u] = a.w;
            }
//!end
        }
        workgroupBarrier();