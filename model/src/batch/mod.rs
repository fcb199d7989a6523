//! A batch: one session that decodes up to `max_batch` sequences together, each in its own
//! slot (its cache rows, encoder memory and search state), so every decoder step reads each
//! weight once for all of them.
//!
//! Sources are encoded into their slots, as many in one encoder pass as its rows hold
//! ([`Batch::encode_all`], [`Limits::encode_sources`]); a search over
//! several slots ([`Batch::generate`](crate::Batch::generate)) runs each step's products over
//! the rows of every live sequence and each sequence's search on its own rows. Every product
//! computes a row as it would alone (`tessel_kernels::gemm`: one chain of multiply-adds per
//! output element whatever the number of rows) and attention runs per sequence, so each
//! sequence's result is the one a plain [`Session`] gives it (with `f16` weights, whose one-row
//! products round apart, within their error bound). The arena is planned for the whole batch
//! up front; nothing allocates after [`Batch::new`].

use tessel_kernels::Isa;

use crate::forward::State;
use crate::layers::Group;
use crate::model::Model;
use crate::plan::{ArenaPlan, Limits};
use crate::search::Search;
use crate::session::{ModelRef, RunError, Session, SessionError};

mod audio;
mod search;

/// One slot: its sequence's place in the decoder and its search.
#[derive(Default)]
pub(crate) struct Slot {
    /// Where its decoder stands.
    pub state: State,
    /// Its search while one runs, and after it its outcome.
    pub search: Option<Search>,
    /// Its next search step.
    pub step: usize,
    /// Whether its search has ended.
    pub done: bool,
    /// Why its search failed, if it did.
    pub error: Option<RunError>,
}

/// A session over `max_batch` slots; see the module documentation.
pub struct Batch<M: ModelRef> {
    pub(crate) session: Session<M>,
    pub(crate) slots: Vec<Slot>,
    /// A step's groups, in row order (room for every slot).
    pub(crate) groups: Vec<Group>,
}

impl<M: ModelRef> Batch<M> {
    /// A batch of `limits.max_batch` slots (`limits` as for [`Session::with_limits`]).
    pub fn new(model: M, isa: Isa, limits: Limits) -> Result<Batch<M>, SessionError> {
        Batch::with_alignment(model, isa, limits, 0)
    }

    /// A batch of `limits.max_batch` slots with room for the cross-attention probabilities of
    /// up to `heads` (layer, head) pairs, which [`Batch::align`] reports for one slot at a
    /// time ([`Session::with_alignment`]; 0 plans none, as [`Batch::new`]). Refused as
    /// [`Session::with_alignment`] refuses: limits the config does not allow, or an arena
    /// that cannot be allocated.
    pub fn with_alignment(
        model: M,
        isa: Isa,
        limits: Limits,
        heads: usize,
    ) -> Result<Batch<M>, SessionError> {
        let session = Session::with_alignment(model, isa, limits, heads)?;
        let slots = (0..limits.max_batch).map(|_| Slot::default()).collect();
        Ok(Batch {
            session,
            slots,
            groups: Vec::with_capacity(limits.max_batch),
        })
    }

    /// The limits it was planned for.
    pub fn limits(&self) -> Limits {
        self.session.limits()
    }

    /// Global attention on the first `tokens` positions of every source encoded from now on
    /// ([`Session::set_global_tokens`]).
    pub fn set_global_tokens(&mut self, tokens: usize) {
        self.session.set_global_tokens(tokens);
    }

    /// Its memory plan.
    pub fn plan(&self) -> &ArenaPlan {
        self.session.plan()
    }

    /// The model.
    pub fn model(&self) -> &Model<'_> {
        self.session.model()
    }

    /// The level its kernels run at.
    pub fn isa(&self) -> Isa {
        self.session.isa()
    }

    /// Its slots: `max_batch`.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// The length of the source encoded in slot `slot`, if one is.
    pub fn source_len(&self, slot: usize) -> Option<usize> {
        self.slots.get(slot).and_then(|s| s.state.src_len)
    }

    /// Encodes `src` into slot `slot`, replacing what the slot held.
    pub fn encode(&mut self, slot: usize, src: &[u32]) -> Result<(), RunError> {
        self.encode_all(&[(slot, src)])
    }

    /// Encodes each `(slot, src)` of `sources` into its slot, replacing what the slot held:
    /// as many sources in one encoder pass as its rows hold ([`Limits::encode_rows`]), each
    /// encoded exactly as alone. Every source is checked before anything runs; a slot may
    /// appear once.
    pub fn encode_all(&mut self, sources: &[(usize, &[u32])]) -> Result<(), RunError> {
        self.check_sources(sources)?;
        let room = self.session.limits().encode_rows();
        let mut first = 0;
        while first < sources.len() {
            let mut rows = 0;
            let mut end = first;
            while end < sources.len() && rows + sources[end].1.len() <= room {
                rows += sources[end].1.len();
                end += 1;
            }
            self.encode_pass(&sources[first..end])?;
            first = end;
        }
        Ok(())
    }

    /// Refuses sources with a slot out of range or given twice, or a source the session
    /// refuses.
    fn check_sources(&self, sources: &[(usize, &[u32])]) -> Result<(), RunError> {
        let max = self.slots.len();
        for (index, &(slot, src)) in sources.iter().enumerate() {
            if slot >= max {
                return Err(RunError::BadSlot { slot, max });
            }
            if sources[..index].iter().any(|&(other, _)| other == slot) {
                return Err(RunError::BadOption("a slot is encoded twice in one call"));
            }
            self.session.check_source(src)?;
        }
        Ok(())
    }

    /// One encoder pass over `sources` (checked, their rows within the pass's).
    fn encode_pass(&mut self, sources: &[(usize, &[u32])]) -> Result<(), RunError> {
        for &(slot, _) in sources {
            self.slots[slot] = Slot::default();
        }
        self.groups.clear();
        self.groups.resize(sources.len(), Group::default());
        let global = self.session.global_tokens();
        let (model, run, plan, arena, _) = self.session.pass();
        let pass = (sources, global);
        crate::forward::encode(model, run, plan, arena, pass, &mut self.groups)?;
        for &(slot, src) in sources {
            self.slots[slot].state.src_len = Some(src.len());
        }
        Ok(())
    }
}
