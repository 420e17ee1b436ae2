//! The SLIT (ACPI 6.5 §5.2.17): a `u64` locality count, then an N x N byte matrix of relative
//! distances. The matrix must fit in the table, so its size is bounded by the table's.

use alloc::vec::Vec;

use super::{HEADER_BYTES, TableError, table_body, u64_at};

/// The SLIT: `distance[i * localities + j]` from domain `i` to domain `j` (10 = local).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slit {
    /// Number of localities (proximity domains).
    pub localities: usize,
    /// The row-major matrix.
    pub distance: Vec<u8>,
}

/// Parses a SLIT (the whole table, header included).
pub fn parse_slit(bytes: &[u8]) -> Result<Slit, TableError> {
    let body = table_body("SLIT", bytes, HEADER_BYTES + 8)?;
    let localities = u64_at(body, HEADER_BYTES);
    let available = body.len() - HEADER_BYTES - 8;
    let need = localities
        .checked_mul(localities)
        .and_then(|cells| usize::try_from(cells).ok())
        .filter(|&cells| cells <= available)
        .ok_or(TableError::Truncated {
            table: "SLIT",
            len_bytes: body.len(),
            need_bytes: usize::MAX,
        })?;
    let localities = localities as usize;
    let distance = body[HEADER_BYTES + 8..HEADER_BYTES + 8 + need].to_vec();
    for (cell, &value) in distance.iter().enumerate() {
        let (from, to) = (cell / localities, cell % localities);
        if (from == to && value != 10) || value < 10 {
            return Err(TableError::BadDistance {
                from,
                to,
                distance: value,
            });
        }
    }
    Ok(Slit {
        localities,
        distance,
    })
}

#[cfg(test)]
mod tests {
    use super::super::build::slit;
    use super::*;

    /// Found by `cargo xtask fuzz --target acpi_tables`: a SLIT whose diagonal was 0 was
    /// taken as is, so a node's distance to itself read 0 instead of ACPI's normalised 10.
    #[test]
    fn slit_distances_outside_the_spec_are_errors() {
        assert_eq!(
            parse_slit(&slit(2, &[0, 20, 20, 10])),
            Err(TableError::BadDistance {
                from: 0,
                to: 0,
                distance: 0
            })
        );
        let err = parse_slit(&slit(2, &[10, 9, 20, 10])).unwrap_err();
        assert!(
            err.to_string().contains("from locality 0 to 1 is 9"),
            "{err}"
        );
        assert!(parse_slit(&slit(2, &[10, 255, 10, 10])).is_ok());
    }

    #[test]
    fn slit_matrix() {
        let parsed = parse_slit(&slit(2, &[10, 20, 20, 10])).unwrap();
        assert_eq!(parsed.localities, 2);
        assert_eq!(parsed.distance, [10, 20, 20, 10]);
        assert!(parse_slit(&slit(3, &[10, 20, 20, 10])).is_err());
        assert!(parse_slit(&slit(u64::MAX, &[])).is_err());
    }
}
