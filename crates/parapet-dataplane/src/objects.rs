//! The programs and maps of a [`crate::Dataplane`] looked up by name after
//! the load, wherever the load ran (`src/handover.rs`).

use aya::maps::Map;
use aya::programs::Program;
use aya::Ebpf;

/// The programs and maps of a [`crate::Dataplane`] that are looked up by name
/// after the load: held by aya's handle after an in-process load, or
/// opened from the pins a loader process handed over.
pub(crate) struct Objects {
    loaded: Option<Ebpf>,
    progs: Vec<(String, Program)>,
    maps: Vec<(String, Map)>,
}

impl Objects {
    pub(crate) fn loaded(ebpf: Ebpf) -> Objects {
        Objects {
            loaded: Some(ebpf),
            progs: Vec::new(),
            maps: Vec::new(),
        }
    }

    pub(crate) fn opened(progs: Vec<(String, Program)>, maps: Vec<(String, Map)>) -> Objects {
        Objects {
            loaded: None,
            progs,
            maps,
        }
    }

    /// Whether aya's handle of the object is here: the programs not loaded
    /// yet can then be loaded in this process.
    pub(crate) fn is_loaded_in_process(&self) -> bool {
        self.loaded.is_some()
    }

    /// Adds a program a later loader process handed over
    /// (`src/late_load.rs`); after an in-process load, aya holds every
    /// program already and this does nothing.
    pub(crate) fn add_program(&mut self, name: &str, prog: Program) {
        if self.loaded.is_none() && self.program(name).is_none() {
            self.progs.push((name.to_string(), prog));
        }
    }

    pub(crate) fn program(&self, name: &str) -> Option<&Program> {
        match &self.loaded {
            Some(e) => e.program(name),
            None => self.progs.iter().find(|(n, _)| n == name).map(|(_, p)| p),
        }
    }

    pub(crate) fn program_mut(&mut self, name: &str) -> Option<&mut Program> {
        match &mut self.loaded {
            Some(e) => e.program_mut(name),
            None => self
                .progs
                .iter_mut()
                .find(|(n, _)| n == name)
                .map(|(_, p)| p),
        }
    }

    pub(crate) fn programs(&self) -> Vec<(&str, &Program)> {
        match &self.loaded {
            Some(e) => e.programs().collect(),
            None => self.progs.iter().map(|(n, p)| (n.as_str(), p)).collect(),
        }
    }

    pub(crate) fn programs_mut(&mut self) -> Vec<(&str, &mut Program)> {
        match &mut self.loaded {
            Some(e) => e.programs_mut().collect(),
            None => self
                .progs
                .iter_mut()
                .map(|(n, p)| (n.as_str(), p))
                .collect(),
        }
    }

    pub(crate) fn map_mut(&mut self, name: &str) -> Option<&mut Map> {
        match &mut self.loaded {
            Some(e) => e.map_mut(name),
            None => self
                .maps
                .iter_mut()
                .find(|(n, _)| n == name)
                .map(|(_, m)| m),
        }
    }

    pub(crate) fn take_map(&mut self, name: &str) -> Option<Map> {
        match &mut self.loaded {
            Some(e) => e.take_map(name),
            None => {
                let i = self.maps.iter().position(|(n, _)| n == name)?;
                Some(self.maps.swap_remove(i).1)
            }
        }
    }
}
