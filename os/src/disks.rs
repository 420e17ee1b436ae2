//! Disk names, as Linux gives them: the OS names each disk a scan finds, and the lab's verify
//! plan names the same disks.

use alloc::string::String;
use alloc::vec::Vec;

/// `sda`, ..., `sdz`, `sdaa`, ... (Linux `sd_format_disk_name`).
pub fn disk_name(index: usize) -> String {
    let mut letters = Vec::new();
    let mut n = index;
    loop {
        letters.push(b'a' + (n % 26) as u8);
        if n < 26 {
            break;
        }
        n = n / 26 - 1;
    }
    letters.reverse();
    let mut name = String::from("sd");
    name.extend(letters.iter().map(|&b| b as char));
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_names_follow_sd() {
        let names: Vec<String> = [0, 1, 25, 26, 27, 701, 702]
            .iter()
            .map(|&i| disk_name(i))
            .collect();
        assert_eq!(
            names,
            ["sda", "sdb", "sdz", "sdaa", "sdab", "sdzz", "sdaaa"]
        );
    }
}
