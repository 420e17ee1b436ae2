//! Disk names, as Linux gives them: the OS names each disk a scan finds, and the lab's verify
//! plan names the same disks. The naming is the stack's (`scsi::midlayer::scan_text`), shared
//! with the Hermit application.

pub use scsi::midlayer::scan_text::disk_name;
