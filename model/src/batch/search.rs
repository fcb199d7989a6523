//! Searches over several slots of a [`Batch`] at once: each step runs the decoder over the
//! beams of every live sequence together, then each sequence's search over its own rows of
//! the logits; a sequence whose search ends leaves the next step's products.

use super::Batch;
use crate::forward::{self, Rows, Tokens};
use crate::layers::Group;
use crate::search::{check_prefix, check_rules, check_search, finished, Next, Search};
use crate::search::{Hypotheses, Request, SlotRequests, StepLogits, StepView};
use crate::session::{ModelRef, RunError};

impl<M: ModelRef> Batch<M> {
    /// Runs `requests[i]` over slot `i` (each encoded) as [`Session::generate`] runs one,
    /// all together, once no search is running in the batch. A request refused by the checks
    /// refuses the whole call before anything runs; a search that fails later (non-finite logits) ends its slot alone. Read each
    /// slot's hypotheses with [`Batch::hypotheses`].
    ///
    /// [`Session::generate`]: crate::Session::generate
    pub fn generate<P, S>(&mut self, requests: &mut [Request<'_, P, S>]) -> Result<(), RunError>
    where
        P: FnMut(&mut StepLogits<'_>),
        S: FnMut(StepView<'_>),
    {
        let max = self.slots.len();
        if requests.len() > max {
            return Err(RunError::BatchTooLarge {
                requests: requests.len(),
                max,
            });
        }
        if (0..max).any(|slot| self.running(slot)) {
            return Err(RunError::BadOption(
                "a search is still running in the batch",
            ));
        }
        for (slot, request) in requests.iter().enumerate() {
            self.check_request(slot, request)?;
        }
        for (slot, request) in requests.iter_mut().enumerate() {
            self.begin(slot, request)?;
        }
        while self.step(requests)? > 0 {}
        Ok(())
    }

    /// Starts `request` over slot `slot` (encoded, its last search ended or none run): checks
    /// it and feeds its forced start (a one-token start is fed by the next step, with the
    /// other slots' rows). From the next
    /// [`Batch::step`] on it decodes with the other running slots, so a stream of requests
    /// is served by admitting each into a free slot between steps.
    pub fn admit<P, S>(
        &mut self,
        slot: usize,
        request: &mut Request<'_, P, S>,
    ) -> Result<(), RunError>
    where
        P: FnMut(&mut StepLogits<'_>),
        S: FnMut(StepView<'_>),
    {
        if self.running(slot) {
            return Err(RunError::BadOption("the slot's search is still running"));
        }
        self.check_request(slot, request)?;
        self.begin(slot, request)
    }

    /// One decoder step over every running slot's beams together, then each one's search
    /// step with its request (`requests.of(slot)`; every running slot needs one). Returns how
    /// many slots are still running.
    pub fn step<'a, P, S, R>(&mut self, requests: &mut R) -> Result<usize, RunError>
    where
        P: FnMut(&mut StepLogits<'_>),
        S: FnMut(StepView<'_>),
        R: SlotRequests<'a, P, S> + ?Sized,
    {
        if !self.live_groups() {
            return Ok(0);
        }
        if self.groups.iter().any(|g| requests.of(g.slot).is_none()) {
            return Err(RunError::BadOption("a running slot needs its request"));
        }
        let (model, run, plan, arena, _) = self.session.pass();
        let pass = (Tokens::Staged, Rows::Beams);
        forward::decode(model, run, plan, arena, &self.groups, pass)?;
        let mut row0 = 0;
        for index in 0..self.groups.len() {
            let Group { slot, rows, .. } = self.groups[index];
            self.slots[slot].state.advance(1, rows, rows);
            if let Some(request) = requests.of(slot) {
                self.search_step(slot, (row0, rows), request)?;
            }
            row0 += rows;
        }
        Ok(self
            .slots
            .iter()
            .filter(|s| s.search.is_some() && !s.done)
            .count())
    }

    /// Whether slot `slot`'s search is running.
    pub fn running(&self, slot: usize) -> bool {
        self.slots
            .get(slot)
            .is_some_and(|s| s.search.is_some() && !s.done)
    }

    /// The finished hypotheses of slot `slot`'s last search, best first, borrowed from the
    /// arena until the next call; the error that ended it, if one did.
    pub fn hypotheses(&mut self, slot: usize) -> Result<Hypotheses<'_>, RunError> {
        let max = self.slots.len();
        let state = self
            .slots
            .get(slot)
            .ok_or(RunError::BadSlot { slot, max })?;
        if let Some(error) = &state.error {
            return Err(error.clone());
        }
        let count = match &state.search {
            Some(search) if state.done => search.finished(),
            _ => return Err(RunError::NotEncoded),
        };
        let limits = self.session.limits();
        let vocab = self.session.model().config().tgt_vocab;
        let (_, _, plan, arena, _) = self.session.pass();
        let buffers = forward::search_buffers(plan, arena, slot, (0, 0), vocab);
        Ok(finished(buffers.search, limits, count))
    }

    /// Checks `request` for slot `slot`: the slot exists and holds an encoded source, and the
    /// search and its forced start fit the plan.
    fn check_request<P, S>(
        &self,
        slot: usize,
        request: &Request<'_, P, S>,
    ) -> Result<(), RunError> {
        let max = self.slots.len();
        let state = self
            .slots
            .get(slot)
            .ok_or(RunError::BadSlot { slot, max })?;
        state.state.src_len.ok_or(RunError::NotEncoded)?;
        let limits = self.session.limits();
        let config = self.session.model().config();
        check_search(&request.search, limits)?;
        check_rules(&request.search, request.rules)?;
        let bos = [config.bos_id];
        let prefix = request.prefix.unwrap_or(&bos);
        check_prefix(prefix, &request.search, limits, config.tgt_vocab)
    }

    /// Sets up slot `slot`'s search for `request` (checked) and feeds its forced start: a
    /// longer one is prefilled alone and its first search step run, a one-token one is staged
    /// for the next batched step.
    fn begin<P, S>(&mut self, slot: usize, request: &mut Request<'_, P, S>) -> Result<(), RunError>
    where
        P: FnMut(&mut StepLogits<'_>),
        S: FnMut(StepView<'_>),
    {
        let (limits, isa) = (self.session.limits(), self.session.isa());
        let config = self.session.model().config();
        let search = Search::new(&request.search, request.rules, isa, config, limits);
        let (bos, vocab) = ([config.bos_id], config.tgt_vocab);
        let state = &mut self.slots[slot];
        state.state.reset_decoder();
        state.search = Some(search);
        (state.step, state.done, state.error) = (0, false, None);
        let prefix = request.prefix.unwrap_or(&bos);
        if let [token] = *prefix {
            // A one-token start joins the next step as a row of its own: at position 0 it
            // attends to itself alone (a softmax over one key is exactly 1), so the step
            // computes what a prefill of it would, for every sequence starting at once.
            let (_, _, plan, arena, _) = self.session.pass();
            forward::search_buffers(plan, arena, slot, (0, 0), vocab).step_tokens[0] = token;
            return Ok(());
        }
        self.feed_prefix(slot, prefix)?;
        self.search_step(slot, (0, 1), request)
    }

    /// Feeds slot `slot`'s forced start (validated) in chunks of up to `max_src_len` rows;
    /// the logits of its last token are then row 0 of the logits region.
    pub(crate) fn feed_prefix(&mut self, slot: usize, prefix: &[u32]) -> Result<(), RunError> {
        let chunk_len = self.session.limits().max_src_len;
        for chunk in prefix.chunks(chunk_len) {
            let group = self.slots[slot].state.group(slot, chunk.len())?;
            let (model, run, plan, arena, _) = self.session.pass();
            let pass = (Tokens::Given(chunk), Rows::Prefix);
            forward::decode(model, run, plan, arena, &[group], pass)?;
            self.slots[slot].state.advance(chunk.len(), 1, 1);
        }
        Ok(())
    }

    /// Gathers the live slots into the next step's groups; whether there is one.
    fn live_groups(&mut self) -> bool {
        self.groups.clear();
        for (index, slot) in self.slots.iter().enumerate() {
            let (Some(search), false) = (&slot.search, slot.done) else {
                continue;
            };
            if let Ok(group) = slot.state.group(index, search.live()) {
                self.groups.push(group);
            }
        }
        !self.groups.is_empty()
    }

    /// Slot `slot`'s search step over its `rows` logits rows from row `row0` of the last pass:
    /// its beams reordered, or its search ended.
    fn search_step<P, S>(
        &mut self,
        slot: usize,
        (row0, rows): (usize, usize),
        request: &mut Request<'_, P, S>,
    ) -> Result<(), RunError>
    where
        P: FnMut(&mut StepLogits<'_>),
        S: FnMut(StepView<'_>),
    {
        let vocab = self.session.model().config().tgt_vocab;
        let (_, _, plan, arena, _) = self.session.pass();
        let state = &mut self.slots[slot];
        let Some(search) = state.search.as_mut() else {
            return Err(RunError::NotEncoded);
        };
        let buffers = forward::search_buffers(plan, arena, slot, (row0, rows), vocab);
        let outcome = search.step(state.step, buffers, &mut |step| {
            (request.process)(step);
            (request.on_step)(step.view());
        });
        state.step += 1;
        match outcome {
            Err(error) => {
                state.error = Some(error);
                state.done = true;
            }
            Ok(Next::Done) => state.done = true,
            Ok(Next::Same) => {}
            Ok(Next::Reordered(kept, lineage)) => {
                let at = (slot, state.state.position);
                let beams = plan.limits.max_beam;
                let mut differing =
                    |search: &mut [f32], b, p| lineage.differing(search, beams, b, p);
                forward::reorder(plan, arena, at, (Tokens::Staged, kept), &mut differing)?;
                state.state.active = kept;
            }
        }
        if state.step == request.search.max_steps {
            state.done = true;
        }
        Ok(())
    }
}
