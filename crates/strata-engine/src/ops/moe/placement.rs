//! Place: which compute unit runs each chosen expert.
//!
//! Experts are addressed by (layer, expert id); [`super::MoeWeights::expert_rows`] turns one
//! into the row ranges (and bytes) of its three matrices in the mapped tensors, which is what a
//! device uploads to hold an expert. Today every expert runs on the CPU. The hybrid tier
//! (hot experts resident in VRAM, the rest on the CPU at the same time) fills a placement
//! from its calibration and gives each run's spans to the unit that holds them.

/// A unit that computes routed experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// The CPU worker pool, from the mapped weights.
    Cpu,
    /// Accelerator `n`, from its resident copy.
    Device(u16),
}

/// Which [`Unit`] runs each (layer, expert); unlisted experts run on the CPU.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    /// `resident[layer]`: (expert, device) pairs, experts ascending.
    resident: Vec<Vec<(usize, u16)>>,
}

impl Placement {
    /// Every expert on the CPU.
    pub const fn cpu_only() -> Placement {
        Placement {
            resident: Vec::new(),
        }
    }

    /// Puts expert `expert` of layer `layer` on `unit`.
    pub fn set(&mut self, layer: usize, expert: usize, unit: Unit) {
        if self.resident.len() <= layer {
            self.resident.resize(layer + 1, Vec::new());
        }
        let l = &mut self.resident[layer];
        let at = l.partition_point(|(e, _)| *e < expert);
        let here = l.get(at).is_some_and(|(e, _)| *e == expert);
        match (unit, here) {
            (Unit::Cpu, true) => {
                l.remove(at);
            }
            (Unit::Cpu, false) => {}
            (Unit::Device(d), true) => l[at].1 = d,
            (Unit::Device(d), false) => l.insert(at, (expert, d)),
        }
    }

    /// The unit that runs expert `expert` of layer `layer`.
    pub fn unit(&self, layer: usize, expert: usize) -> Unit {
        let Some(l) = self.resident.get(layer) else {
            return Unit::Cpu;
        };
        match l.binary_search_by_key(&expert, |(e, _)| *e) {
            Ok(i) => Unit::Device(l[i].1),
            Err(_) => Unit::Cpu,
        }
    }

    /// Experts of `layer` placed off the CPU.
    pub fn off_cpu(&self, layer: usize) -> usize {
        self.resident.get(layer).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn experts_default_to_the_cpu_and_move_both_ways() {
        let mut p = Placement::cpu_only();
        assert_eq!(p.unit(3, 7), Unit::Cpu);
        p.set(3, 7, Unit::Device(0));
        p.set(3, 2, Unit::Device(1));
        assert_eq!(p.unit(3, 7), Unit::Device(0));
        assert_eq!(p.unit(3, 2), Unit::Device(1));
        assert_eq!((p.off_cpu(3), p.off_cpu(0)), (2, 0));
        p.set(3, 7, Unit::Cpu);
        assert_eq!(p.unit(3, 7), Unit::Cpu);
        assert_eq!(p.off_cpu(3), 1);
    }
}
