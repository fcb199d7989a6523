//! Searches over several slots of a [`Batch`] at once: each step runs the decoder over the
//! beams of every live sequence together, then each sequence's search over its own rows of
//! the logits; a sequence whose search ends leaves the next step's products.

use super::{check_prefix, check_search, finished, Hypotheses, Next, Request, Search};
use super::{StepLogits, StepView};
use crate::forward::{self, Rows, Tokens};
use crate::layers::Group;
use crate::session::{Batch, ModelRef, RunError};

impl<M: ModelRef> Batch<M> {
    /// Runs `requests[i]` over slot `i` (each encoded) as [`Session::generate`] runs one,
    /// all together. A request refused by the checks refuses the whole call before anything
    /// runs; a search that fails later (non-finite logits) ends its slot alone. Read each
    /// slot's hypotheses with [`Batch::hypotheses`].
    ///
    /// [`Session::generate`]: crate::Session::generate
    pub fn generate<P, S>(&mut self, requests: &mut [Request<'_, P, S>]) -> Result<(), RunError>
    where
        P: FnMut(&mut StepLogits<'_>),
        S: FnMut(StepView<'_>),
    {
        self.start(requests)?;
        for (slot, request) in requests.iter_mut().enumerate() {
            let bos = [self.session.model().config().bos_id];
            self.prefill(slot, request.prefix.unwrap_or(&bos))?;
            self.search_step(slot, (0, 1), request)?;
        }
        while self.live_groups() {
            let (model, run, plan, arena, _) = self.session.pass();
            let pass = (Tokens::Staged, Rows::Beams);
            forward::decode(model, run, plan, arena, &self.groups, pass)?;
            let mut row0 = 0;
            for index in 0..self.groups.len() {
                let Group { slot, rows, .. } = self.groups[index];
                self.slots[slot].state.advance(1, rows, rows);
                self.search_step(slot, (row0, rows), &mut requests[slot])?;
                row0 += rows;
            }
        }
        Ok(())
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
            Some(search) if state.done => search.tally.finished,
            _ => return Err(RunError::NotEncoded),
        };
        let limits = self.session.limits();
        let vocab = self.session.model().config().tgt_vocab;
        let (_, _, plan, arena, _) = self.session.pass();
        let buffers = forward::search_buffers(plan, arena, slot, (0, 0), vocab);
        Ok(finished(buffers.search, limits, count))
    }

    /// Checks every request, then sets up each slot's search.
    fn start<P, S>(&mut self, requests: &[Request<'_, P, S>]) -> Result<(), RunError> {
        let max = self.slots.len();
        if requests.len() > max {
            return Err(RunError::BatchTooLarge {
                requests: requests.len(),
                max,
            });
        }
        let limits = self.session.limits();
        let isa = self.session.isa();
        let config = self.session.model().config();
        let bos = [config.bos_id];
        for (slot, request) in self.slots.iter().zip(requests) {
            slot.state.src_len.ok_or(RunError::NotEncoded)?;
            check_search(&request.search, limits)?;
            let prefix = request.prefix.unwrap_or(&bos);
            check_prefix(prefix, &request.search, limits, config.tgt_vocab)?;
        }
        for (slot, request) in self.slots.iter_mut().zip(requests) {
            slot.state.reset_decoder();
            slot.search = Some(Search::new(
                &request.search,
                request.rules,
                isa,
                config,
                limits,
            ));
            (slot.step, slot.done, slot.error) = (0, false, None);
        }
        Ok(())
    }

    /// Feeds slot `slot`'s forced start (validated) in chunks of up to `max_src_len` rows.
    fn prefill(&mut self, slot: usize, prefix: &[u32]) -> Result<(), RunError> {
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
            if let Ok(group) = slot.state.group(index, search.live) {
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
            Ok(Next::Reordered(kept)) => {
                let at = (slot, state.state.position);
                forward::reorder(plan, arena, at, (Tokens::Staged, kept))?;
                state.state.active = kept;
            }
        }
        if state.step == request.search.max_steps {
            state.done = true;
        }
        Ok(())
    }
}
