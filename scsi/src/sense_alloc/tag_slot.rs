//! One tag's bound sense buffer in `pertag` mode, and who has it while it is out.
//!
//! An untagged caller (one without a tag of its own) borrows an idle tag's buffer. Its free
//! must go back to a slot that was *lent*, never to the empty slot of a tag whose own command
//! holds the buffer: that command's free would then find its slot full and send its buffer to
//! the slab, leaving the lending tag empty, and the lending tag's next command would have to
//! allocate, which is what `pertag` exists to avoid.

/// A tag's slot: its buffer, or who took it.
pub(super) enum TagSlot<E> {
    /// The buffer is here.
    Held(E),
    /// The tag's own command has it (or a failed host reset withheld it).
    Tagged,
    /// An untagged caller borrowed it.
    Lent,
}

impl<E> TagSlot<E> {
    /// Takes the buffer for the tag's own command, if the slot holds it.
    #[inline(always)]
    pub(super) fn take_tagged(&mut self) -> Option<E> {
        self.take(TagSlot::Tagged)
    }

    /// Takes the buffer for an untagged caller, if the slot holds it.
    pub(super) fn take_lent(&mut self) -> Option<E> {
        self.take(TagSlot::Lent)
    }

    fn take(&mut self, taker: TagSlot<E>) -> Option<E> {
        match self {
            TagSlot::Held(_) => match core::mem::replace(self, taker) {
                TagSlot::Held(buf) => Some(buf),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether the slot holds its buffer.
    pub(super) fn is_held(&self) -> bool {
        matches!(self, TagSlot::Held(_))
    }

    /// Whether an untagged caller has the slot's buffer.
    pub(super) fn is_lent(&self) -> bool {
        matches!(self, TagSlot::Lent)
    }
}
