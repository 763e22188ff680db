//! Splitting a batch by Redis Cluster hash slot: a script may only touch keys of one slot.

use smallvec::SmallVec;

/// The positions of a batch's items, one group per slot, in first-seen order.
pub(crate) type SlotGroups = SmallVec<[SmallVec<[usize; 3]>; 2]>;

/// Every item in one group: a single server runs any keys in one script.
pub(crate) fn together(items: usize) -> SlotGroups {
    SmallVec::from_elem((0..items).collect(), 1)
}

/// Groups item positions by their keys' slots (in item order), groups in first-seen order.
pub(crate) fn by_slot(slots: impl IntoIterator<Item = u16>) -> SlotGroups {
    let mut groups: SlotGroups = SmallVec::new();
    let mut seen: SmallVec<[u16; 2]> = SmallVec::new();
    for (position, slot) in slots.into_iter().enumerate() {
        match seen.iter().position(|known| *known == slot) {
            Some(group) => groups[group].push(position),
            None => {
                seen.push(slot);
                groups.push(SmallVec::from_elem(position, 1));
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_server_takes_everything_at_once() {
        let groups = together(3);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].as_slice(), &[0, 1, 2]);
    }

    #[test]
    fn a_cluster_groups_by_slot_in_first_seen_order() {
        let groups = by_slot([7, 3, 7, 9]);
        let groups: Vec<Vec<usize>> = groups.iter().map(|group| group.to_vec()).collect();
        assert_eq!(groups, vec![vec![0, 2], vec![1], vec![3]]);
    }
}
