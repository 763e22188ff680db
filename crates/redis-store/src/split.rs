//! Splitting a batch by Redis Cluster hash slot: a script may only touch keys of one slot.

use smallvec::SmallVec;

use crate::layout::StoredKey;

/// The positions of a batch's items, one group per slot, in first-seen order.
pub(crate) type SlotGroups = SmallVec<[SmallVec<[usize; 3]>; 2]>;

/// Groups item positions by slot on a cluster; a single server takes every key in one group.
pub(crate) fn by_slot(keys: &[StoredKey], cluster: bool) -> SlotGroups {
    let mut groups: SlotGroups = SmallVec::new();
    if !cluster {
        groups.push((0..keys.len()).collect());
        return groups;
    }
    let mut slots: SmallVec<[u16; 2]> = SmallVec::new();
    for (position, key) in keys.iter().enumerate() {
        match slots.iter().position(|slot| *slot == key.slot) {
            Some(group) => groups[group].push(position),
            None => {
                slots.push(key.slot);
                groups.push(SmallVec::from_elem(position, 1));
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(slot: u16) -> StoredKey {
        StoredKey {
            name: format!("k{slot}"),
            slot,
        }
    }

    #[test]
    fn a_single_server_takes_everything_at_once() {
        let groups = by_slot(&[key(1), key(2), key(1)], false);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].as_slice(), &[0, 1, 2]);
    }

    #[test]
    fn a_cluster_groups_by_slot_in_first_seen_order() {
        let groups = by_slot(&[key(7), key(3), key(7), key(9)], true);
        let groups: Vec<Vec<usize>> = groups.iter().map(|group| group.to_vec()).collect();
        assert_eq!(groups, vec![vec![0, 2], vec![1], vec![3]]);
    }
}
