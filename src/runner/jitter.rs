//! A tiny seeded generator for poll jitter. The executor takes its seed from the caller, so the
//! simulator replays it and production can seed it however it likes; `src/` owns no global RNG.

#[derive(Clone, Debug)]
pub struct Jitter {
    state: u64,
}

impl Jitter {
    pub fn new(seed: u64) -> Jitter {
        Jitter { state: seed }
    }

    /// SplitMix64 step: well mixed and cheap, which is all jitter needs.
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A draw in [0, 1000).
    pub fn permille(&mut self) -> u32 {
        (self.next_u64() % 1_000) as u32
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn same_seed_same_draws_and_in_range() {
        let mut a = super::Jitter::new(7);
        let mut b = super::Jitter::new(7);
        for _ in 0..1_000 {
            let x = a.permille();
            assert!(x < 1_000);
            assert_eq!(x, b.permille());
        }
        assert_ne!(
            super::Jitter::new(8).permille(),
            super::Jitter::new(7).permille()
        );
    }
}
