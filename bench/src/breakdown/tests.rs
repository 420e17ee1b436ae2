use super::*;

fn frame(function: &str, file: &str) -> InlineFrame {
    InlineFrame {
        function: function.into(),
        file: file.into(),
        line: None,
    }
}

#[test]
fn frames_map_to_the_io_layers() {
    let layer = |function, file| layer_of(&[frame(function, file)], None);
    assert_eq!(
        layer("encode", "/w/scsi/src/wire/cdb_encode.rs"),
        "CDB build"
    );
    assert_eq!(layer("read", "/w/scsi/src/wire/cdb.rs"), "CDB build");
    assert_eq!(
        layer("parse", "/w/scsi/src/wire/cdb.rs"),
        "target parse/respond"
    );
    assert_eq!(
        layer("respond<C>", "/w/scsi/src/target/respond.rs"),
        "target parse/respond"
    );
    assert_eq!(
        layer("submit<H, A, C>", "/w/scsi/src/midlayer/mod.rs"),
        "midlayer submit"
    );
    assert_eq!(
        layer("poll<H, A, C>", "/w/scsi/src/midlayer/mod.rs"),
        "completion"
    );
    assert_eq!(layer("pop", "/w/pools/src/magazine.rs"), "sense alloc/free");
    assert_eq!(
        layer("alloc", "/w/scsi/src/sense_alloc/mod.rs"),
        "sense alloc/free"
    );
    assert_eq!(layer("run", "/w/workloads/src/io/mod.rs"), "workload loop");
    assert_eq!(
        layer("add", "/w/drivers/src/virtio/queue.rs"),
        "virtqueue / request frame"
    );
    assert_eq!(
        layer("ring", "/w/kernel/src/storage/virtio_doorbell.rs"),
        "doorbell / registers"
    );
    assert_eq!(
        layer("idle", "/w/drivers/src/irq.rs"),
        "completion wait (irq policy)"
    );
    assert_eq!(
        layer("handler", "/w/kernel/src/arch/irq.rs"),
        "interrupt entry/exit"
    );
    assert_eq!(
        layer("queue_command", "/w/drivers/src/virtio_scsi/host.rs"),
        "driver submit"
    );
    assert_eq!(
        layer("poll", "/w/drivers/src/mpt/host/mod.rs"),
        "driver completion"
    );
    let layout_in_parse = [
        frame("read_from_bytes", "/w/scsi/src/wire/cdb_layout.rs"),
        frame("parse", "/w/scsi/src/wire/cdb.rs"),
    ];
    assert_eq!(layer_of(&layout_in_parse, None), "target parse/respond");
}

#[test]
fn library_frames_take_the_layer_of_the_project_code_they_are_inlined_into() {
    let chain = [
        frame("next<u16>", "/rustc/abc/library/core/src/iter/range.rs"),
        frame("submit<H, A, C>", "/w/scsi/src/midlayer/mod.rs"),
        frame("run<H, A, C>", "/w/workloads/src/io/mod.rs"),
    ];
    assert_eq!(layer_of(&chain, None), "midlayer submit");
    assert_eq!(layer_of(&[], Some("talc::Talc::malloc")), "heap (talc)");
    assert_eq!(layer_of(&[], Some("memcpy")), "other / library");
    let magazine = "<pools::magazine::Magazine<A> as pools::ElementAllocator>::try_alloc";
    assert_eq!(layer_of(&[], Some(magazine)), "sense alloc/free");
    assert_eq!(
        layer_of(&[], Some("kernel::arch::time::now_ns")),
        "kernel (clock, locks, markers)"
    );
}

#[test]
fn blocks_are_charged_to_their_function_and_layer() {
    let symbols = SymbolTable::parse(
        "0000000000100000 0000000000000100 t scsi::midlayer::Midlayer<H,A,C>::submit\n\
         0000000000100100 0000000000000100 t talc::talc::Talc<O>::malloc\n",
    );
    let library = InlineFrame {
        line: Some(857),
        ..frame("next<u16>", "/rustc/abc/library/core/src/iter/range.rs")
    };
    let submit = InlineFrame {
        line: Some(42),
        ..frame("submit<H, A, C>", "/w/scsi/src/midlayer/mod.rs")
    };
    let unnumbered = frame("complete<H, A, C>", "/w/scsi/src/midlayer/completion.rs");
    let frames = HashMap::from([
        (0x100010, vec![library, submit]),
        (0x100030, vec![unnumbered]),
    ]);
    let blocks = [
        Block {
            vaddr: 0x100010,
            insns: 5,
            execs: 100,
            wait_execs: 0,
        },
        Block {
            vaddr: 0x100020,
            insns: 2,
            execs: 100,
            wait_execs: 0,
        },
        Block {
            vaddr: 0x100030,
            insns: 1,
            execs: 7,
            wait_execs: 0,
        },
        Block {
            vaddr: 0x100110,
            insns: 10,
            execs: 3,
            wait_execs: 0,
        },
        Block {
            vaddr: 0x900000,
            insns: 1,
            execs: 1,
            wait_execs: 0,
        },
    ];
    let mut blocks = blocks.to_vec();
    blocks[4].wait_execs = 4;
    let breakdown = attribute(&blocks, &symbols, &frames);
    assert_eq!(breakdown.total, 500 + 200 + 7 + 30 + 1);
    assert_eq!(breakdown.waiting, 4);
    let layer = |name| breakdown.layers.iter().find(|l| l.0 == name).unwrap().1;
    // Without an inline chain the symbol's path decides.
    assert_eq!(layer("midlayer submit"), 700);
    assert_eq!(layer("completion"), 7);
    assert_eq!(layer("other / library"), 1);
    assert_eq!(layer("heap (talc)"), 30);
    assert_eq!(
        breakdown.functions[0],
        ("scsi::midlayer::Midlayer::submit".to_owned(), 707)
    );
    assert_eq!(breakdown.functions[2], ("0x900000".to_owned(), 1));
    // Source lines: the innermost project frame's, else the symbol's name.
    assert_eq!(
        breakdown.lines,
        [
            ("/w/scsi/src/midlayer/mod.rs:42".to_owned(), 500),
            ("scsi::midlayer::Midlayer::submit".to_owned(), 200),
            ("talc::talc::Talc::malloc".to_owned(), 30),
            (
                "/w/scsi/src/midlayer/completion.rs:? (complete)".to_owned(),
                7
            ),
            ("0x900000".to_owned(), 1),
        ]
    );
}

#[test]
fn source_lines_are_named_from_the_workspace_root() {
    let root = Path::new("/work/main");
    assert_eq!(
        relative_line("/work/main/drivers/src/mpt/host/mod.rs:88", root),
        "drivers/src/mpt/host/mod.rs:88"
    );
    assert_eq!(relative_line("memcpy", root), "memcpy");
}

#[test]
fn generic_arguments_are_dropped_from_names() {
    assert_eq!(
        short_name("scsi::midlayer::Midlayer<H,A,C>::submit"),
        "scsi::midlayer::Midlayer::submit"
    );
    assert_eq!(
        short_name("scsi::midlayer::completion::<impl scsi::midlayer::Midlayer<H,A,C>>::complete"),
        "scsi::midlayer::completion::complete"
    );
    let qualified = "<pools::magazine::Magazine<A> as pools::ElementAllocator>::try_alloc";
    assert_eq!(short_name(qualified), qualified);
}
