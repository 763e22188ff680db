//! Splitting a batch by Redis Cluster hash slot: a script may only touch keys of one slot.

use smallvec::SmallVec;

/// The positions of a batch's items, one group per slot, in first-seen order.
pub(crate) type SlotGroups = SmallVec<[SmallVec<[usize; 3]>; 2]>;

/// Groups item positions by their keys' `slots` on a cluster; a single server takes every key
/// in one group.
pub(crate) fn by_slot(slots: &[u16], cluster: bool) -> SlotGroups {
    let mut groups: SlotGroups = SmallVec::new();
    if !cluster {
        groups.push((0..slots.len()).collect());
        return groups;
    }
    let mut seen: SmallVec<[u16; 2]> = SmallVec::new();
    for (position, &slot) in slots.iter().enumerate() {
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
        let groups = by_slot(&[1, 2, 1], false);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].as_slice(), &[0, 1, 2]);
    }

    #[test]
    fn a_cluster_groups_by_slot_in_first_seen_order() {
        let groups = by_slot(&[7, 3, 7, 9], true);
        let groups: Vec<Vec<usize>> = groups.iter().map(|group| group.to_vec()).collect();
        assert_eq!(groups, vec![vec![0, 2], vec![1], vec![3]]);
    }
}
