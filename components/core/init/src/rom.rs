//! Init's ROM service (`rt::session::rom`; docs/architecture.md,
//! "Sessions and routing", 6): a `Rom` session routed to `parent` is
//! answered by init itself, frame by frame, at once.
//!
//! A boot module's frames are the kernel's frames of the boot image
//! (`abi::bootinfo`, "ROM frames"; init's copy of their table at
//! `interfaces::init::ROM_FRAMES`), minted read-only for the client: no
//! copy, no memory and no slot of init's, and every client of a module
//! shares the same frames. Only the client's own `config` tree, a slice
//! of the config ROM that starts anywhere, is copied into fresh frames
//! of init's (a page or two).

use formats::bootimage::{BootImage, Region, LARGE};
use rt::abi::caddr::{in_table, own};
use rt::abi::{ObjectType, Rights};
use rt::interfaces::{init, session};
use rt::println;
use rt::resources::Resources;
use rt::session::rom;
use rt::spawn;
use rt::syscall;
use ucore::load::PAGE_SIZE;

use crate::sessions::reply;
use crate::Kid;

/// Init's ROM service (`rt::session::rom`).
pub struct RomService<'r, 'a> {
    pub image: &'r BootImage<'a>,
    /// The image's physical start modulo 2 MiB (how its frames are cut).
    pub phase: u64,
    pub res: &'r mut Resources,
    /// Init's address space, for the scratch page.
    pub vspace: u32,
    pub transit: u32,
}

/// Where a module's bytes come from.
enum Module<'a> {
    /// The kernel's frames of the boot image: the module's region and the
    /// index of its first frame in the table.
    Frames {
        size: u64,
        first: u64,
        region: Region,
    },
    /// Bytes copied page by page into fresh frames (`config`).
    Copied(&'a [u8]),
}

impl RomService<'_, '_> {
    /// Answers a request `label`, `words` on the ROM session of child
    /// `badge` (without `session::PARENT_SESSION`).
    pub fn serve(mut self, kids: &[Kid<'_>], badge: u64, label: u64, words: &[u64; 4]) {
        let index = badge & !session::PARENT_SESSION;
        let Some(client) = kids.iter().find(|k| k.id as u64 + 1 == index) else {
            return reply(rom::NOT_FOUND, [0; 4], None);
        };
        let (component, client) = (&client.component, client.component.name);
        let (bytes, len) = session::unpack(words);
        let name = core::str::from_utf8(&bytes[..len]).unwrap_or("?");
        // `config` is the client's own config tree, not the scenario's ROM
        // (which holds every component's config).
        let module = if name == "config" {
            Module::Copied(component.config_tree())
        } else {
            let found = self.image.find(name).and_then(|entry| {
                let (first, region) = self.image.entry_frames(name, self.phase)?;
                Some(Module::Frames {
                    size: entry.data.len() as u64,
                    first,
                    region,
                })
            });
            match found {
                Some(module) => module,
                None => {
                    println!("init: {client} asks for ROM {name:?}: no such module; refused");
                    return reply(rom::NOT_FOUND, [0; 4], None);
                }
            }
        };
        let i = label >> rom::INDEX_SHIFT;
        match (label & ((1 << rom::INDEX_SHIFT) - 1), &module) {
            (rom::INFO, Module::Copied(data)) => {
                let pages = (data.len() as u64).div_ceil(PAGE_SIZE);
                println!(
                    "init: {client} reads ROM {name:?} ({} bytes, {pages} pages)",
                    data.len()
                );
                reply(rom::OK, [data.len() as u64, pages, pages, 0], None)
            }
            (rom::INFO, &Module::Frames { size, region, .. }) => {
                let (head, large, tail) = region.split(self.phase);
                // Where the module must start in a 2 MiB page for its 2 MiB
                // frames to map: its physical start's distance past one.
                let phase = if large > 0 {
                    (self.phase + region.offset) % LARGE
                } else {
                    0
                };
                println!(
                    "init: {client} reads ROM {name:?} ({size} bytes, {} pages, shared read-only: {large} frames of 2 MiB, {} of 4 KiB)",
                    region.pages,
                    head + tail
                );
                let frames = head + large + tail;
                reply(rom::OK, [size, region.pages, frames, phase], None)
            }
            (rom::FRAME, Module::Copied(data)) => {
                let pages = (data.len() as u64).div_ceil(PAGE_SIZE);
                if i >= pages {
                    return reply(rom::OUT_OF_RANGE, [0; 4], None);
                }
                let start = (i * PAGE_SIZE) as usize;
                let chunk = &data[start..data.len().min(start + PAGE_SIZE as usize)];
                match self.page(chunk) {
                    Ok(()) => reply(
                        rom::OK,
                        [i * PAGE_SIZE, PAGE_SIZE, 0, 0],
                        Some(self.transit),
                    ),
                    Err(why) => {
                        println!("init: ROM {name:?} frame {i} for {client}: {why}");
                        reply(rom::NO_MEMORY, [0; 4], None)
                    }
                }
            }
            (rom::FRAME, &Module::Frames { first, region, .. }) => {
                let Some((offset, large)) = region.frame(self.phase, i) else {
                    return reply(rom::OUT_OF_RANGE, [0; 4], None);
                };
                // Slot 0 of a table is its header: frame n is at n + 1.
                let Some(slot) = u32::try_from(first + i + 1).ok() else {
                    return reply(rom::OUT_OF_RANGE, [0; 4], None);
                };
                let src = in_table(init::ROM_FRAMES, slot);
                match syscall::cap_mint(src, own(self.transit), Rights::READ, 0) {
                    Ok(()) => {
                        let bytes = if large { LARGE } else { PAGE_SIZE };
                        reply(rom::OK, [offset, bytes, 0, 0], Some(self.transit))
                    }
                    Err(e) => {
                        println!("init: ROM {name:?} frame {i} for {client}: CapMint failed: {e}");
                        reply(rom::NO_MEMORY, [0; 4], None)
                    }
                }
            }
            _ => reply(rom::UNKNOWN, [label, 0, 0, 0], None),
        }
    }

    /// A fresh frame of init's (kept: see `rt::session::rom`, "Cost")
    /// holding `chunk`, minted read-only into the transit slot.
    fn page(&mut self, chunk: &[u8]) -> Result<(), &'static str> {
        let frame = self
            .res
            .make(ObjectType::Frame4K, 0)
            .map_err(|_| "no memory or slot left for a frame")?;
        spawn::fill_frame(self.vspace, frame, 0, chunk, 0).map_err(|_| "copying failed")?;
        syscall::cap_mint(own(frame), own(self.transit), Rights::READ, 0)
            .map_err(|_| "CapMint (read-only) failed")
    }
}
